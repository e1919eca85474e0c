/* `nitrix run` functions of the sparse family (rows in ops-sparse.def). */
#include "cli.h"
