package dockernet

import "github.com/docker/docker/api/types/network"

func networkInspectOptions() network.InspectOptions { return network.InspectOptions{} }
