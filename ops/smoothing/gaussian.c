/* Placeholder: the module lands here. */
#include "nitrix-ops.h"
