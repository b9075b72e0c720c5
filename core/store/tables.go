package store

import sdkstore "github.com/ployz/ployz/sdk/store"

// Cluster is the Cluster-wide facts table.
func Cluster(c *sdkstore.Client) sdkstore.Table[ClusterBody] {
	return sdkstore.NewTable[ClusterBody](c, "cluster", "id")
}

// Volumes is the Volumes table.
func Volumes(c *sdkstore.Client) sdkstore.Table[VolumeBody] {
	return sdkstore.NewTable[VolumeBody](c, "volumes", "id")
}
