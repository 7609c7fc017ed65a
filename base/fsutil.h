/* base/fsutil.h - small file-system and clock helpers shared by the
 * checkpoint, event, export and hook code. Internal. */
#ifndef LOOM_FSUTIL_H
#define LOOM_FSUTIL_H
#include "loom/loom_base.h"

/* errno -> loom_code: ENOENT/ENOTDIR NOT_FOUND, EEXIST/ENOTEMPTY
 * ALREADY_EXISTS, EACCES/EPERM/EROFS PERMISSION_DENIED, ENOSPC/EDQUOT/ENOMEM
 * RESOURCE_EXHAUSTED, anything else UNKNOWN. */
loom_code loom__errno_code(int e);
/* mkdir -p (mode 0777 before umask). A non-directory in the way is
 * FAILED_PRECONDITION; other failures name the directory and errno. */
loom_code loom__mkdir_p(const char *path, loom_status *st);
/* CLOCK_MONOTONIC seconds. */
double loom__mono_secs(void);

#endif
