package images

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// TargetPlatform is the one os/architecture the named Machines (every
// Machine when names is empty) run images for, so a build can match it.
// Machines of two platforms are refused: a Service's image is one tag,
// built for one platform. It is empty when no Machine reports one.
func TargetPlatform(ctx context.Context, entry *rpc.Client, names []string) (string, error) {
	fan, err := rpc.FanoutMethod(ctx, entry, rpc.Target{All: len(names) == 0, Set: names}, rpc.ListImages, rpc.ListImagesRequest{})
	if err != nil {
		return "", fmt.Errorf("ask the Machines their platform: %w", err)
	}
	by := map[string][]string{}
	for _, r := range fan.Results {
		if r.Error != nil {
			continue
		}
		list, err := rpc.ListImages.Answer(r.Payload)
		if err != nil || list.Platform == "" {
			continue
		}
		by[list.Platform] = append(by[list.Platform], r.MachineName)
	}
	return onePlatform(by)
}

func onePlatform(by map[string][]string) (string, error) {
	switch len(by) {
	case 0:
		return "", nil
	case 1:
		for p := range by {
			return p, nil
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(by)) {
		ms := slices.Sorted(slices.Values(by[p]))
		parts = append(parts, fmt.Sprintf("%s (%s)", p, strings.Join(ms, ", ")))
	}
	return "", fmt.Errorf("the Machines run two or more platforms: %s; ployz builds each build: Service for one platform; build it for each platform yourself and deliver each with `ployz image push -m MACHINE`", strings.Join(parts, ", "))
}

// localPlatform is the os/architecture the operator's Docker builds for
// by default.
func localPlatform(ctx context.Context, docker *client.Client) string {
	v, err := docker.ServerVersion(ctx)
	if err != nil || v.Os == "" || v.Arch == "" {
		return ""
	}
	return v.Os + "/" + v.Arch
}

// imagePlatform is an image's os/architecture (with its variant).
func imagePlatform(os, arch, variant string) string {
	p := os + "/" + arch
	if variant != "" {
		p += "/" + variant
	}
	return p
}

// samePlatform compares a Machine's platform with an image's: a Machine
// reports os/arch, and any variant of that arch runs there.
func samePlatform(machine, image string) bool {
	return machine == image || strings.HasPrefix(image, machine+"/")
}
