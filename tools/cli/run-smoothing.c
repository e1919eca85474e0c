/* `nitrix run` functions of the smoothing family (rows in ops-smoothing.def). */
#include "cli.h"
