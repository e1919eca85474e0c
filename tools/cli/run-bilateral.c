/* `nitrix run` functions of the bilateral family (rows in ops-bilateral.def). */
#include "cli.h"
