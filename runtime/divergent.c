/* Placeholder: the divergent-op registry is being written. */
#include "internal.h"

typedef int nx_placeholder_divergent;
