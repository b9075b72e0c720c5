package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
)

// peersFile remembers the gossip addresses of the members this node met,
// next to its database, so a restart can contact them at once.
func (n *Node) peersFile() string {
	if n.cfg.DBPath == "" || n.cfg.DBPath == ":memory:" {
		return ""
	}
	return filepath.Join(filepath.Dir(n.cfg.DBPath), "gossip-peers.json")
}

// loadPeers reads the remembered addresses; a missing or unreadable file
// is an empty list (the bootstrap peers and the peers' own reconnects still
// apply).
func loadPeers(path string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var addrs []string
	if json.Unmarshal(b, &addrs) != nil {
		return nil
	}
	return addrs
}

// savePeers writes the members met so far when they differ from known,
// and returns what is now remembered.
func (n *Node) savePeers(known []string) []string {
	path := n.peersFile()
	now := n.gsp.PeerAddrs()
	if path == "" || len(now) == 0 || slices.Equal(now, known) {
		return known
	}
	b, _ := json.Marshal(now)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		n.log.Warn("remember gossip peers", "file", path, "error", err)
		return known
	}
	if err := os.Rename(tmp, path); err != nil {
		n.log.Warn("remember gossip peers", "file", path, "error", err)
		return known
	}
	return now
}
