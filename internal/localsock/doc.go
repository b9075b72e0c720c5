// Package localsock guards the store's local unix sockets (its HTTP API and
// its admin socket) on both ends: a listener in a directory only its owner
// may enter that hangs up on peers other than root or its own uid, and a
// dialer that refuses a socket anyone else could have put in place and
// checks that the process answering is root's (or its own uid's).
//
// It also lets a TCP client check, before it sends a secret, that the
// loopback listener it reached belongs to root or to itself: any local user
// can bind a free loopback port while the real server is down.
package localsock
