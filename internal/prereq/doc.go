// Package prereq is how tests that need something of the host (root,
// Docker, /dev/net/tun, iptables) react when it is missing: they skip on a
// developer's machine, and fail where PLOYZ_REQUIRE_PRIVILEGED=1 says the
// host must have everything (.ci/run sets it), so a CI machine without
// a prerequisite cannot quietly lose the tests that need it.
package prereq
