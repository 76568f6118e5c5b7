// The engine's verbs-level values equal libibverbs' (the drop-in library casts
// between them), and the drop-in exports what rdma-core 44's library exports.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "core/types.h"

namespace r = softrdma::core;

#define SAME(a, b) static_assert(static_cast<int>(a) == static_cast<int>(b), #a " != " #b)
SAME(r::WcStatus::kSuccess, IBV_WC_SUCCESS);
SAME(r::WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR);
SAME(r::WcStatus::kLocQpOpErr, IBV_WC_LOC_QP_OP_ERR);
SAME(r::WcStatus::kLocProtErr, IBV_WC_LOC_PROT_ERR);
SAME(r::WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR);
SAME(r::WcStatus::kMwBindErr, IBV_WC_MW_BIND_ERR);
SAME(r::WcStatus::kBadRespErr, IBV_WC_BAD_RESP_ERR);
SAME(r::WcStatus::kRemInvReqErr, IBV_WC_REM_INV_REQ_ERR);
SAME(r::WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR);
SAME(r::WcStatus::kRemOpErr, IBV_WC_REM_OP_ERR);
SAME(r::WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR);
SAME(r::WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR);
SAME(r::WcStatus::kRemInvRdReqErr, IBV_WC_REM_INV_RD_REQ_ERR);
SAME(r::WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR);
SAME(r::WcOpcode::kSend, IBV_WC_SEND);
SAME(r::WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE);
SAME(r::WcOpcode::kRdmaRead, IBV_WC_RDMA_READ);
SAME(r::WcOpcode::kCompSwap, IBV_WC_COMP_SWAP);
SAME(r::WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD);
SAME(r::WcOpcode::kLocalInv, IBV_WC_LOCAL_INV);
SAME(r::WcOpcode::kBindMw, IBV_WC_BIND_MW);
SAME(r::WcOpcode::kRecv, IBV_WC_RECV);
SAME(r::WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM);
SAME(r::kWcGrh, IBV_WC_GRH);
SAME(r::kWcWithImm, IBV_WC_WITH_IMM);
SAME(r::kWcWithInv, IBV_WC_WITH_INV);
SAME(r::WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE);
SAME(r::WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM);
SAME(r::WrOpcode::kSend, IBV_WR_SEND);
SAME(r::WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM);
SAME(r::WrOpcode::kRdmaRead, IBV_WR_RDMA_READ);
SAME(r::WrOpcode::kAtomicCmpAndSwp, IBV_WR_ATOMIC_CMP_AND_SWP);
SAME(r::WrOpcode::kAtomicFetchAndAdd, IBV_WR_ATOMIC_FETCH_AND_ADD);
SAME(r::WrOpcode::kLocalInv, IBV_WR_LOCAL_INV);
SAME(r::WrOpcode::kBindMw, IBV_WR_BIND_MW);
SAME(r::WrOpcode::kSendWithInv, IBV_WR_SEND_WITH_INV);
SAME(r::kSendFence, IBV_SEND_FENCE);
SAME(r::kSendSignaled, IBV_SEND_SIGNALED);
SAME(r::kSendSolicited, IBV_SEND_SOLICITED);
SAME(r::kSendInline, IBV_SEND_INLINE);
SAME(r::kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE);
SAME(r::kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE);
SAME(r::kAccessRemoteRead, IBV_ACCESS_REMOTE_READ);
SAME(r::kAccessRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC);
SAME(r::kAccessMwBind, IBV_ACCESS_MW_BIND);
SAME(r::kAccessZeroBased, IBV_ACCESS_ZERO_BASED);
SAME(r::MwType::k1, IBV_MW_TYPE_1);
SAME(r::MwType::k2, IBV_MW_TYPE_2);
SAME(r::QpType::kRc, IBV_QPT_RC);
SAME(r::QpType::kUc, IBV_QPT_UC);
SAME(r::QpType::kUd, IBV_QPT_UD);
SAME(r::QpState::kReset, IBV_QPS_RESET);
SAME(r::QpState::kInit, IBV_QPS_INIT);
SAME(r::QpState::kRtr, IBV_QPS_RTR);
SAME(r::QpState::kRts, IBV_QPS_RTS);
SAME(r::QpState::kSqd, IBV_QPS_SQD);
SAME(r::QpState::kSqe, IBV_QPS_SQE);
SAME(r::QpState::kErr, IBV_QPS_ERR);
SAME(r::kQpState, IBV_QP_STATE);
SAME(r::kQpCurState, IBV_QP_CUR_STATE);
SAME(r::kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY);
SAME(r::kQpAccessFlags, IBV_QP_ACCESS_FLAGS);
SAME(r::kQpPkeyIndex, IBV_QP_PKEY_INDEX);
SAME(r::kQpPort, IBV_QP_PORT);
SAME(r::kQpQkey, IBV_QP_QKEY);
SAME(r::kQpAv, IBV_QP_AV);
SAME(r::kQpPathMtu, IBV_QP_PATH_MTU);
SAME(r::kQpTimeout, IBV_QP_TIMEOUT);
SAME(r::kQpRetryCnt, IBV_QP_RETRY_CNT);
SAME(r::kQpRnrRetry, IBV_QP_RNR_RETRY);
SAME(r::kQpRqPsn, IBV_QP_RQ_PSN);
SAME(r::kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC);
SAME(r::kQpAltPath, IBV_QP_ALT_PATH);
SAME(r::kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER);
SAME(r::kQpSqPsn, IBV_QP_SQ_PSN);
SAME(r::kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC);
SAME(r::kQpPathMigState, IBV_QP_PATH_MIG_STATE);
SAME(r::kQpCap, IBV_QP_CAP);
SAME(r::kQpDestQpn, IBV_QP_DEST_QPN);
SAME(r::kQpRateLimit, IBV_QP_RATE_LIMIT);
SAME(r::Mtu::k256, IBV_MTU_256);
SAME(r::Mtu::k1024, IBV_MTU_1024);
SAME(r::Mtu::k4096, IBV_MTU_4096);
SAME(r::AsyncEventType::kCqErr, IBV_EVENT_CQ_ERR);
SAME(r::AsyncEventType::kQpFatal, IBV_EVENT_QP_FATAL);
SAME(r::AsyncEventType::kQpReqErr, IBV_EVENT_QP_REQ_ERR);
SAME(r::AsyncEventType::kQpAccessErr, IBV_EVENT_QP_ACCESS_ERR);
SAME(r::AsyncEventType::kSqDrained, IBV_EVENT_SQ_DRAINED);
SAME(r::AsyncEventType::kPortActive, IBV_EVENT_PORT_ACTIVE);
SAME(r::AsyncEventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED);
SAME(r::AsyncEventType::kQpLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED);
static_assert(sizeof(r::Sge) == sizeof(ibv_sge));

namespace {

// name -> default version node, from `objdump -T` of a shared library.
std::map<std::string, std::string> default_versions(const std::string& lib) {
  std::map<std::string, std::string> out;
  const std::string cmd = "objdump -T '" + lib + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::string l = line;
    if (l.find("*UND*") != std::string::npos || l.find("IBVERBS") == std::string::npos) continue;
    // ... DF .text  SIZE  VERSION  NAME   (a version in parentheses is a hidden compat one)
    char ver[128], name[256];
    const auto pos = l.find("IBVERBS");
    if (pos == std::string::npos || (pos > 0 && l[pos - 1] == '(')) continue;
    if (std::sscanf(l.c_str() + pos, "%127s %255s", ver, name) == 2 && std::string(ver) != name) {
      out[name] = ver;
    }
  }
  pclose(p);
  return out;
}

}  // namespace

TEST(VerbsAbi, EveryDefaultSymbolOfRdmaCore44IsExportedInItsNode) {
  const auto real = default_versions("/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
  if (real.empty()) GTEST_SKIP() << "Debian's libibverbs.so.1 or objdump is not installed";
  const auto ours = default_versions(std::string(SOFTRDMA_BIN_DIR) + "/../lib/libibverbs.so.1");
  ASSERT_FALSE(ours.empty());
  EXPECT_GE(real.size(), 140u);  // 146 in rdma-core 44
  for (const auto& [name, ver] : real) {
    auto it = ours.find(name);
    if (it == ours.end()) {
      ADD_FAILURE() << name << "@@" << ver << " is not exported";
    } else {
      EXPECT_EQ(it->second, ver) << name;
    }
  }
  for (const auto& [name, ver] : ours) EXPECT_TRUE(real.count(name)) << "extra symbol " << name;
}
