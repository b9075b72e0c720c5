package operator

import (
	"fmt"
	"net/netip"

	"github.com/ployz/ployz/core/meshaddr"
)

// Allocation is one subnet the operator gave a Machine.
type Allocation struct {
	MachineID   string       `json:"machine_id"`
	MachineName string       `json:"machine_name"`
	Subnet      netip.Prefix `json:"subnet"`
	State       string       `json:"state"` // allocated, joined, failed
}

// Allocate returns the subnet for machineID in the context's Cluster: the
// one already in the history when a previous attempt saved it (a retry
// resumes), else the lowest /24 of network that neither the history nor
// the observed subnets use. The choice is saved before it is returned, so
// it is in the history before anything publishes or joins it.
func (s *Store) Allocate(context, machineID, machineName string, network netip.Prefix, observed []netip.Prefix) (netip.Prefix, error) {
	hist, err := s.Allocations(context)
	if err != nil {
		return netip.Prefix{}, err
	}
	used := append([]netip.Prefix{}, observed...)
	for _, a := range hist {
		if a.MachineID == machineID {
			return a.Subnet, nil
		}
		used = append(used, a.Subnet)
	}
	subnet, err := meshaddr.NextFreeSubnetIn(network, used)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("allocate a subnet for %s: %w", machineName, err)
	}
	if _, err := s.db.Exec(`INSERT INTO allocations(context, machine_id, machine_name, subnet) VALUES(?, ?, ?, ?)`,
		context, machineID, machineName, subnet.String()); err != nil {
		return netip.Prefix{}, fmt.Errorf("save allocation of %s to %s: %w", subnet, machineName, err)
	}
	return subnet, nil
}

// SetAllocationState records how an enrollment with this allocation ended.
func (s *Store) SetAllocationState(context, machineID, state string) error {
	_, err := s.db.Exec(`UPDATE allocations SET state = ?, updated_at = datetime('now') WHERE context = ? AND machine_id = ?`,
		state, context, machineID)
	return err
}

// Allocations lists a context's allocation history, oldest first.
func (s *Store) Allocations(context string) ([]Allocation, error) {
	rows, err := s.db.Query(`SELECT machine_id, machine_name, subnet, state FROM allocations WHERE context = ? ORDER BY created_at, subnet`, context)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Allocation
	for rows.Next() {
		var a Allocation
		var subnet string
		if err := rows.Scan(&a.MachineID, &a.MachineName, &subnet, &a.State); err != nil {
			return nil, err
		}
		if a.Subnet, err = netip.ParsePrefix(subnet); err != nil {
			return nil, fmt.Errorf("allocation of %s: subnet %q: %w", a.MachineName, subnet, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
