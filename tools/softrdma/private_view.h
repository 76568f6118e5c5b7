// softrdma run's private view of /dev and /sys: a mount namespace of the process's own in which
// the kernel view's entries (verbs/kernel_view.h) exist and everything else looks as before.
// Nothing changes outside it: root gets a new mount namespace whose mounts do not propagate
// back; other users a user namespace that maps only their own uid and gid. The program exec'd
// after it, and every process that program starts, see the view. See docs/middleware.md.
#pragma once

#include <string>
#include <vector>

#include "verbs/kernel_view.h"

namespace softrdma::tools {

// Call while single-threaded, before exec. False with the reason when no namespace can be had
// or the view cannot be built; the process's view of the file system is then as it was.
bool enter_private_view(const std::vector<verbs::ViewEntry>& entries, std::string& why);

}  // namespace softrdma::tools
