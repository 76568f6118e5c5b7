#include "lint/iwarp_check.h"
namespace softrdma::lint {
struct IwarpChecker::Impl {};
IwarpChecker::IwarpChecker(Report&) : impl_(std::make_unique<Impl>()) {}
IwarpChecker::~IwarpChecker() = default;
void IwarpChecker::on_tcp_segment(std::uint64_t, const wire::FrameView&) {}
void IwarpChecker::finish() {}
}  // namespace softrdma::lint
