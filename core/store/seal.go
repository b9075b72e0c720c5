package store

import sdkstore "github.com/ployz/ployz/sdk/store"

// SealedPrefix marks a sealed field. The sealer lives in sdk/store, where
// the plugins that open sealed fields (the ingress proxy) reach it too.
const SealedPrefix = sdkstore.SealedPrefix

// Sealer seals a row's field with a key derived from the Cluster secret.
type Sealer = sdkstore.Sealer

// NewSealer derives the sealer of table's field from secret.
var NewSealer = sdkstore.NewSealer

// SavedStatePurpose derives the key that seals Saved State revisions'
// compose files in the revisions table.
const SavedStatePurpose = "saved-state"

// CertificateKeysPurpose derives the key that seals the certificates
// table's key_pem: the same key and associated data as the ingress
// plugin's (plugins/ingress-caddy/internal/acme/seal.go), so a key ployzd
// seals opens there.
const CertificateKeysPurpose = "certificate-keys"
