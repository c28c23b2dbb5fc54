#pragma once
// A request's identity extras as the wire carries them (RequestIdentity,
// schema/prefix.capnp; spec 0x07B, 0x07D) and as both index owners key
// them. The hash chain hashes them into each block's extra key E_i
// (block_extras.hpp): the adapter into every block, a multimodal input into
// the blocks it overlaps, a prompt-embedding digest into its block, the
// salts into block 0. The radix index keys a whole subtree by one extra key
// (0x08): every extra of the request goes into it, so two requests share
// pages only when their identities are equal as a whole (a request with an
// image reuses nothing of a text-only one, even before the image: exact,
// with less reuse than the hash chain's).
//
// Malformed identities are refused with invalid_argument naming the field
// (identity.adapter_version, identity.multimodal[i], ...) before any index
// reads the tokens.
#include <string>

#include "schema/prefix_types.hpp"
#include "services/common/result.hpp"
#include "services/prefix/block_extras.hpp"

namespace kvrt {

Status validate_identity(const RequestIdentity& identity);

// The hash chain's extras for a request of a namespace whose grant binds
// `namespace_salt` (namespace, salt, generation); the request's own salt
// is appended to it.
Result<RequestExtras> identity_extras(const RequestIdentity& identity, const std::string& namespace_salt);

// Canonical bytes of the identity (length-prefixed fields, items in the
// order given), for the radix index's subtree key; empty for an empty
// identity, so plain requests keep the namespace's key.
Result<std::string> identity_material(const RequestIdentity& identity);

}  // namespace kvrt
