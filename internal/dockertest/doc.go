// Package dockertest gives tests that run Containers on the Docker
// installed here what they need of it: a daemon that answers and the
// directory it keeps Containers in (or the test ends through prereq), and
// a tiny image of their own, built from this tree and imported FROM
// scratch, so they depend neither on an image another step builds (the
// lab's) nor on a registry.
package dockertest
