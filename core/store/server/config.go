package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/ployz/ployz/internal/fsutil"
)

// FileConfig is the TOML config file, using Corrosion's keys so one file
// shape serves both; unknown keys are ignored.
type FileConfig struct {
	DB struct {
		Path              string   `toml:"path"`
		SchemaPaths       []string `toml:"schema_paths"`
		SubscriptionsPath string   `toml:"subscriptions_path"`
	} `toml:"db"`
	Gossip struct {
		Addr         string   `toml:"addr"`
		ExternalAddr string   `toml:"external_addr"`
		Bootstrap    []string `toml:"bootstrap"`
		Plaintext    bool     `toml:"plaintext"`
		ClusterLabel string   `toml:"cluster_label"`
	} `toml:"gossip"`
	API struct {
		Addr   string `toml:"addr"`
		Socket string `toml:"socket"` // Ployz's own key: see Config.APISocket
		Authz  struct {
			BearerToken string `toml:"bearer-token"`
		} `toml:"authz"`
	} `toml:"api"`
	Admin struct {
		Path string `toml:"path"`
	} `toml:"admin"`
}

// LoadFileConfig reads a TOML config file.
func LoadFileConfig(path string) (*FileConfig, error) {
	var fc FileConfig
	if _, err := toml.DecodeFile(path, &fc); err != nil {
		return nil, fmt.Errorf("read store config %s: %w", path, err)
	}
	return &fc, nil
}

// Apply copies the file's settings into c.
func (fc *FileConfig) Apply(c *Config) {
	c.DBPath = fc.DB.Path
	c.SchemaPaths = fc.DB.SchemaPaths
	c.SubsPath = fc.DB.SubscriptionsPath
	c.GossipAddr = fc.Gossip.Addr
	c.GossipExtAddr = fc.Gossip.ExternalAddr
	c.Bootstrap = fc.Gossip.Bootstrap
	c.Label = fc.Gossip.ClusterLabel
	c.APIAddr = fc.API.Addr
	c.APISocket = fc.API.Socket
	c.Token = fc.API.Authz.BearerToken
	c.AdminPath = fc.Admin.Path
}

// RotateTokenFile writes a fresh random bearer token to path (0600,
// replacing the file atomically) and returns it. The store calls it at
// every start, so a token that leaked is good until the next restart only.
func RotateTokenFile(path string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mint API token: %w", err)
	}
	tok := hex.EncodeToString(b[:])
	if err := fsutil.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token file %s: %w", path, err)
	}
	return tok, nil
}

// ReadTokenFile reads a bearer token from a file, trimming whitespace.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}
