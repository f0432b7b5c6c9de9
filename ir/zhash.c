#include "zhash.h"

_Thread_local zarena *zhash_arena;
_Thread_local int zhash_oom;
