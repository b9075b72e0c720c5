package deploy

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/ployz/ployz/core/images"
)

// buildInputs fills b's secrets, SSH agents, additional contexts and
// cache sources from the service's build: section, as Docker Compose
// hands them to BuildKit; relative paths are the compose file's
// directory's.
func buildInputs(b *Build, dir string, bc types.BuildConfig, defs types.Secrets) error {
	secrets, err := buildSecrets(dir, bc.Secrets, defs)
	if err != nil {
		return err
	}
	b.Secrets = secrets
	for _, k := range bc.SSH {
		switch {
		case k.ID == "":
			return fmt.Errorf("build.ssh: an entry has no id")
		case k.Path == "":
			b.SSH = append(b.SSH, k.ID)
		default:
			b.SSH = append(b.SSH, k.ID+"="+absUnder(dir, k.Path))
		}
	}
	slices.Sort(b.SSH) // compose-go hands them over in map order: one order for every load
	for _, name := range slices.Sorted(maps.Keys(bc.AdditionalContexts)) {
		src := bc.AdditionalContexts[name]
		if strings.HasPrefix(src, types.ServicePrefix) {
			return fmt.Errorf("build.additional_contexts.%s: %q: another Service's image as a context is not supported; name a directory or docker-image://", name, src)
		}
		if !strings.Contains(src, "://") {
			src = absUnder(dir, src)
		}
		if b.AdditionalContexts == nil {
			b.AdditionalContexts = map[string]string{}
		}
		b.AdditionalContexts[name] = src
	}
	b.CacheFrom = slices.Clone(bc.CacheFrom)
	return nil
}

// buildSecrets resolves build.secrets against the top-level secrets: the
// id is the reference's target, else its source (as Docker Compose
// does); BuildKit reads a file: or an environment: secret.
func buildSecrets(dir string, refs []types.ServiceSecretConfig, defs types.Secrets) ([]images.BuildSecret, error) {
	var out []images.BuildSecret
	for i, ref := range refs {
		field := fmt.Sprintf("build.secrets[%d]", i)
		def, ok := defs[ref.Source]
		if !ok {
			return nil, fmt.Errorf("%s: secret %q is not declared under the top-level secrets:", field, ref.Source)
		}
		s := images.BuildSecret{ID: ref.Source}
		if ref.Target != "" {
			s.ID = ref.Target
		}
		switch {
		case def.File != "":
			s.File = absUnder(dir, def.File)
		case def.Environment != "":
			s.Env = def.Environment
		default:
			return nil, fmt.Errorf("%s: secret %q: a build reads a secret from file: or environment: only", field, ref.Source)
		}
		out = append(out, s)
	}
	return out, nil
}

// absUnder is p, made absolute against dir when relative.
func absUnder(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
