// Command ployz-logstore is the Ployz logstore plugin. It is not implemented yet: it
// builds, answers --version, and serves no capability.
package main

import "github.com/ployz/ployz/plugins/internal/placeholder"

func main() { placeholder.Main("logstore") }
