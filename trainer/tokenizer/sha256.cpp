// sha256.cpp: SHA-256 through OpenSSL's one-shot EVP_Digest.
#include "trainer/tokenizer/sha256.h"

#include <openssl/evp.h>

#include "kernels/error.h"

namespace ddp {

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &digest_bytes, EVP_sha256(), nullptr) != 1)
    throw Error("sha256: OpenSSL's EVP_Digest failed");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_bytes);
  for (unsigned int i = 0; i < digest_bytes; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

}  // namespace ddp
