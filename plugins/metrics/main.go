// Command ployz-metrics is the Ployz metrics plugin. It is not implemented yet: it
// builds, answers --version, and serves no capability.
package main

import "github.com/ployz/ployz/plugins/internal/placeholder"

func main() { placeholder.Main("metrics") }
