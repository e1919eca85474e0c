/* Placeholder: this pass is being written. */
#include "internal.h"

typedef int nx_placeholder_pass_simplify;
