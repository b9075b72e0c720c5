// Package containerstest is the test kit of the Container commands
// (core/daemon/feature/containers) and of the daemon tests that run
// Service Containers through them: a throwaway Docker network and
// namespace, the testapp image and the paths the commands keep their
// state in, all removed when the test ends. It does not import the
// feature, so the feature's own tests can use it too.
package containerstest
