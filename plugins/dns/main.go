// Command ployz-dns is the Ployz dns plugin. It is not implemented yet: it
// builds, answers --version and the SDK's Info call, and serves no
// capability (empty capability list) until its own issue lands.
package main

import "github.com/ployz/ployz/plugins/internal/placeholder"

func main() { placeholder.Main("dns") }
