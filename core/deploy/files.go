package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
)

// Limits on what a deploy ships from the operator's computer: these are
// configuration files, carried inside one create request.
const (
	maxShippedFile  = 1 << 20 // one file, or one directory's archive
	maxShippedTotal = 2 << 20 // per Service
)

// shipper turns compose configs, secrets and relative bind mounts into
// Spec.Files: each is read on the operator's computer, named in the spec by
// digest (so a changed file changes the spec hash and redeploys only the
// Services that mount it) and kept by digest in files for the executor.
type shipper struct {
	dir   string
	proj  *types.Project
	env   map[string]string
	files map[string][]byte
	warns []string
}

func (sh *shipper) service(svc *Service, s types.ServiceConfig) error {
	total := 0
	add := func(f rpc.FileSpec, b []byte) error {
		total += len(b)
		if total > maxShippedTotal {
			return fmt.Errorf("%s: the files shipped with this Service exceed %d bytes; use an image or a volume", f.Source, maxShippedTotal)
		}
		sh.files[f.Digest] = b
		svc.Spec.Files = append(svc.Spec.Files, f)
		return nil
	}
	// Configs mount at /<name>, secrets below /run/secrets, unless the
	// service names a target.
	refs := func(kind string, list []types.FileReferenceConfig, defs map[string]types.FileObjectConfig, base string) error {
		for i, c := range list {
			field := fmt.Sprintf("%ss[%d]", kind, i)
			def, ok := defs[c.Source]
			if !ok {
				return fmt.Errorf("%s.source: %s %q is not declared at the top level", field, kind, c.Source)
			}
			target := c.Target
			if target == "" {
				target = c.Source
			}
			if !path.IsAbs(target) {
				target = base + target
			}
			f, b, err := sh.object(field, kind+":"+c.Source, def, target, c.Mode)
			if err == nil {
				err = add(f, b)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	configs, secrets := map[string]types.FileObjectConfig{}, map[string]types.FileObjectConfig{}
	for k, v := range sh.proj.Configs {
		configs[k] = types.FileObjectConfig(v)
	}
	for k, v := range sh.proj.Secrets {
		secrets[k] = types.FileObjectConfig(v)
	}
	var cfgRefs, secRefs []types.FileReferenceConfig
	for _, c := range s.Configs {
		cfgRefs = append(cfgRefs, types.FileReferenceConfig(c))
	}
	for _, c := range s.Secrets {
		secRefs = append(secRefs, types.FileReferenceConfig(c))
	}
	if err := refs("config", cfgRefs, configs, "/"); err != nil {
		return err
	}
	if err := refs("secret", secRefs, secrets, "/run/secrets/"); err != nil {
		return err
	}
	for i, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind || !isLocalPath(v.Source) {
			continue
		}
		f, b, err := sh.local(fmt.Sprintf("volumes[%d]", i), v.Source, v.Target)
		if err != nil {
			return err
		}
		if !v.ReadOnly {
			sh.warns = append(sh.warns, fmt.Sprintf("service %q: bind mount %s is shipped from this computer and mounted read-only", s.Name, v.Source))
		}
		if err := add(f, b); err != nil {
			return err
		}
	}
	return nil
}

// object reads one config or secret definition: a file next to the
// compose file, inline content, or an environment variable's value.
func (sh *shipper) object(field, source string, def types.FileObjectConfig, target string, mode *types.FileMode) (rpc.FileSpec, []byte, error) {
	var b []byte
	switch {
	case bool(def.External):
		return rpc.FileSpec{}, nil, fmt.Errorf("%s: %s is external, which ployz does not support; declare file, content or environment", field, source)
	case def.File != "":
		f, b, err := sh.local(field, def.File, target)
		if err != nil {
			return f, b, err
		}
		if f.Kind != "file" {
			return f, nil, fmt.Errorf("%s: %s is a directory; a %s is one file", field, def.File, strings.SplitN(source, ":", 2)[0])
		}
		f.Source = source
		f.Mode = fileMode(mode)
		return f, b, nil
	case def.Content != "":
		b = []byte(def.Content)
	case def.Environment != "":
		v, ok := sh.env[def.Environment]
		if !ok {
			return rpc.FileSpec{}, nil, fmt.Errorf("%s: %s reads environment variable %s, which is not set", field, source, def.Environment)
		}
		b = []byte(v)
	default:
		return rpc.FileSpec{}, nil, fmt.Errorf("%s: %s declares no file, content or environment", field, source)
	}
	if len(b) > maxShippedFile {
		return rpc.FileSpec{}, nil, fmt.Errorf("%s: %s is larger than %d bytes", field, source, maxShippedFile)
	}
	return rpc.FileSpec{Target: target, Digest: digest(b), Kind: "file", Mode: fileMode(mode), Source: source}, b, nil
}

func fileMode(m *types.FileMode) uint32 {
	if m == nil {
		return 0
	}
	return uint32(*m) & 0o777
}

// local reads a file or small directory relative to the compose file.
func (sh *shipper) local(field, rel, target string) (rpc.FileSpec, []byte, error) {
	p := rel
	if !filepath.IsAbs(p) {
		p = filepath.Join(sh.dir, rel)
	}
	st, err := os.Stat(p)
	if err != nil {
		return rpc.FileSpec{}, nil, fmt.Errorf("%s: %s: %w", field, rel, err)
	}
	f := rpc.FileSpec{Target: target, Kind: "file", Source: rel}
	var b []byte
	if st.IsDir() {
		f.Kind = "dir"
		b, err = images.TarDir(p, maxShippedFile, false, nil)
	} else {
		if st.Size() > maxShippedFile {
			return f, nil, fmt.Errorf("%s: %s is larger than %d bytes; ship it in an image or a volume", field, rel, maxShippedFile)
		}
		b, err = os.ReadFile(p)
		f.Mode = uint32(st.Mode().Perm()) | 0o444
	}
	if err != nil {
		return f, nil, fmt.Errorf("%s: %s: %w", field, rel, err)
	}
	if len(b) > maxShippedFile {
		return f, nil, fmt.Errorf("%s: %s is larger than %d bytes; ship it in an image or a volume", field, rel, maxShippedFile)
	}
	f.Digest = digest(b)
	return f, b, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// isLocalPath reports whether a bind mount source names a path next to
// the compose file rather than one on the Machine.
func isLocalPath(src string) bool {
	return src == "." || src == ".." || strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../")
}
