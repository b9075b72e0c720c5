package store

// Every subscription in this package's tests is Strict: a repeated change
// id or an unknown event ends it with an error, so a test that expects
// "no duplicate, no gap" fails when the server sends one.
func init() { strictEvents = true }
