"""The examples of the Python section of docs/user-guide.md, run through doctest."""
import doctest
import os

import nitrix

from conftest import SOURCE_ROOT


def _section():
    text = open(os.path.join(SOURCE_ROOT, "docs", "user-guide.md")).read()
    start = text.index("\n## Python\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    # a code fence ends an example's expected output, as a blank line does
    return "\n".join("" if line.startswith("```") else line for line in section.split("\n"))


def test_user_guide_python_examples():
    section = _section()
    parser = doctest.DocTestParser()
    test = parser.get_doctest(section, {}, "user-guide.md#python", "docs/user-guide.md", 0)
    assert len(test.examples) >= 20
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


def test_package_docstring_example():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for t in finder.find(nitrix, "nitrix", globs={}):
        if t.name == "nitrix":
            runner.run(t)
    assert runner.summarize(verbose=False).failed == 0
