// Package fsutil holds the one way Ployz writes a file that must survive
// power loss whole: the daemon's state, plugin manifests and reattach
// records, and the configuration a long-lived plugin keeps.
package fsutil
