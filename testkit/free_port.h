// A free loopback TCP port, for servers a test starts (and addresses where
// nobody listens).
#pragma once

namespace pacset {
namespace store_test {

// A loopback TCP port nobody listens on right now.
int FreePort();

}  // namespace store_test
}  // namespace pacset
