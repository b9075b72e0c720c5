package store

import sdkstore "github.com/ployz/ployz/sdk/store"

// Allocations is the subnet allocation history, one row per Machine id
// (AllocationBody).
func Allocations(c *sdkstore.Client) sdkstore.Table[AllocationBody] {
	return sdkstore.NewTable[AllocationBody](c, "allocations", "id")
}

// Removals is the project removal marks table, one row per namespace
// (RemovalBody).
func Removals(c *sdkstore.Client) sdkstore.Table[RemovalBody] {
	return sdkstore.NewTable[RemovalBody](c, "removals", "id")
}

// AllocationBody is the subnet an operator gave one Machine: its name
// then, how its enrollment stands (allocated, joined, failed, removed),
// who allocated it and when (unix ms). A frozen format: fields are only
// added.
type AllocationBody struct {
	Subnet      string          `json:"subnet"`
	MachineName string          `json:"machine_name,omitempty"`
	State       string          `json:"state"`
	Operator    HistoryOperator `json:"operator"`
	CreatedAt   int64           `json:"created_at"`
	UpdatedAt   int64           `json:"updated_at"`
	// Source names where an imported allocation came from
	// ("import:<context>").
	Source string `json:"source,omitempty"`
}

// RemovalBody is a pending project removal: the one persisted intent a
// command that meets it finishes (docs/architecture.md bet 3).
type RemovalBody struct {
	Project     string          `json:"project"`
	Environment string          `json:"environment"`
	Operator    HistoryOperator `json:"operator"`
	CreatedAt   int64           `json:"created_at"` // unix ms
}
