// sha256.h: the SHA-256 of a byte string as lower-case hex, to check that a
// ranks table is the one a tokenizer was pinned to (bpe_ranks.h). OpenSSL's
// libcrypto computes it: a well-kept, audited implementation that Debian
// ships (libssl-dev), rather than a hand-written one in the tree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// "306cd27f..." (64 hex digits). ddp::Error where libcrypto fails.
std::string sha256_hex(const std::vector<uint8_t>& bytes);

}  // namespace ddp
