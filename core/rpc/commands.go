package rpc

// Command names and the capabilities that name them. A new feature is a
// new row here with a new capability; a name never changes meaning
// (docs/architecture.md, Machine RPC rule 1).
const (
	CmdDescribeContract = "describe_contract"
	CapDescribeContract = "ployz.machine.describe_contract.v1"

	CmdInspect = "inspect"
	CapInspect = "ployz.machine.inspect.v1"

	CmdInitialize = "initialize"
	CapInitialize = "ployz.machine.initialize.v1"

	CmdJoin = "join"
	CapJoin = "ployz.machine.join.v1"

	CmdListMachines = "list_machines"
	CapListMachines = "ployz.machine.list.v1"

	CmdUpdateMachine = "update_machine"
	CapUpdateMachine = "ployz.machine.update.v1"

	CmdForgetMachine = "forget_machine"
	CapForgetMachine = "ployz.machine.forget.v1"

	CmdReset = "reset"
	CapReset = "ployz.machine.reset.v1"

	CmdPublishMachine = "publish_machine"
	CapPublishMachine = "ployz.machine.publish.v1"

	CmdMembership = "membership"
	CapMembership = "ployz.machine.membership.v1"
)
