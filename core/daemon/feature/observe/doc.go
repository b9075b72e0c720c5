// Package observe is the daemon's Observe Store feature: the Machine RPC
// forwarded to the Log Store and metrics plugins (log_history, tail_logs,
// query_metrics), the counters file ployzd keeps for the metrics plugin
// (its own and each plugin's dropped store events, job runs, volume
// protection), and the two plugins' specs. Whether the Log Store holds a
// Container's lines (LogsHeld) is asked by the Container commands before
// an ended one-off run is removed.
//
// Handing the plugins their specs stays with the daemon's serving loop;
// this package only says what the specs are.
package observe
