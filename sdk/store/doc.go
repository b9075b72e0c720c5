// Package store is the replicated store as a plugin reads it, and the
// client every reader of the store uses, ployzd's too.
//
// The client speaks Corrosion's HTTP API subset (Exec, Query, Subscribe,
// Health, the membership view), so it works against Ployz's own store node
// or a real Corrosion agent alike. On top of it:
//
//   - Row and Table: typed, tolerant access to one replicated table (a
//     newer writer's unknown fields are ignored, missing ones defaulted);
//   - the bodies of the tables a plugin reads (machines, containers,
//     serving) and of the rows a plugin owns (certificates, serving_acks):
//     frozen formats, pinned by testdata/bodies.json;
//   - Reader and Writer: the narrow interface a plugin is written against
//     (what it reads, the rows it owns), served by TokenFileClient, which
//     re-reads its bearer token file after a failure;
//   - Watch: subscriptions that tell a reader when to read again;
//   - ClusterSecret: the secret a Machine keeps on disk, from which a
//     plugin derives the key it seals a field of its rows with.
//
// The tables only ployzd and the operator use (history, leases, volume runs
// and the operator state) and the schema are core's (core/store); a plugin
// never imports core/.
package store
