// Package iocount counts bytes as a transfer reads them, so another
// goroutine can report how far it got (image loads, Volume Run sends).
package iocount
