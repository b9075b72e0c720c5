package tarsafe

import (
	"archive/tar"
	"fmt"
	"strings"
)

// Next is tr.Next refusing sparse files: archive/tar reads a sparse
// file's holes as zeros, so an entry of a few hundred bytes reads as
// h.Size bytes (up to 2^63), and a reader copying it would write that
// much to disk or to every relay target. No archive Ployz takes (docker
// save, shipped directories, bundles) holds sparse files.
func Next(tr *tar.Reader) (*tar.Header, error) {
	h, err := tr.Next()
	if err != nil {
		return h, err
	}
	if Sparse(h) {
		return nil, fmt.Errorf("archive entry %q is a sparse file (%d bytes once its holes are filled): refused", h.Name, h.Size)
	}
	return h, nil
}

// Sparse reports whether h is a sparse file, in the old GNU format or in
// PAX's GNU.sparse records.
func Sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}
