/* Placeholder: this module is being written. */
#include "internal.h"

typedef int nx_placeholder_cache;
