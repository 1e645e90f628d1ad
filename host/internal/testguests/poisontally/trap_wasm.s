#include "textflag.h"

TEXT ·unreachable(SB), NOSPLIT, $0-0
	UNDEF
