#pragma once
// Every owner's encode()/decode<T>() (the generated schema/<owner>_codec.hpp),
// for the code that moves any owner's messages: the node's session and
// gateway actors, the client, the tests of the wire. An owner's own code
// includes only its own codec header.
#include "schema/allocator_codec.hpp"
#include "schema/authorization_codec.hpp"
#include "schema/common_codec.hpp"
#include "schema/executor_codec.hpp"
#include "schema/identity_codec.hpp"
#include "schema/mapper_codec.hpp"
#include "schema/prefix_codec.hpp"
#include "schema/reuse_codec.hpp"
#include "schema/session_codec.hpp"
