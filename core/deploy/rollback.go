package deploy

import (
	"slices"
	"strings"
)

// MissingImage is an image a Deploy needs that no observed Machine holds
// and that no registry can supply.
type MissingImage struct {
	Service string `json:"service"`
	Image   string `json:"image"`
}

// ImagesNowhere lists the images of app's Services that no observed
// Machine holds and whose reference names no registry, so neither a
// Machine-to-Machine copy nor a pull can bring them. A rollback checks it
// before anything changes: the revision it returns to may name an image
// every Machine has since removed. Machines whose images were not read
// are not counted as holding or lacking anything.
func ImagesNowhere(app App, snap Snapshot) []MissingImage {
	var out []MissingImage
	for _, s := range app.Services {
		img := s.Spec.Image
		if img == "" || FromRegistry(img) || heldAnywhere(snap, img) {
			continue
		}
		if !slices.ContainsFunc(out, func(m MissingImage) bool { return m.Image == img && m.Service == s.Name }) {
			out = append(out, MissingImage{Service: s.Name, Image: img})
		}
	}
	return out
}

func heldAnywhere(snap Snapshot, img string) bool {
	for _, m := range snap.Machines {
		if m.ImagesKnown && HasImage(m.Images, img) {
			return true
		}
	}
	return false
}

// FromRegistry reports whether ref names a registry host (a first path
// component with a dot or a port, or localhost), as Docker reads it; a
// bare name like "app:1" lives only where it was built or loaded.
func FromRegistry(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return false
	}
	return strings.ContainsAny(first, ".:") || first == "localhost"
}
