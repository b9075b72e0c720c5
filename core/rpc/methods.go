package rpc

import (
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/volume"
)

// The typed commands: each declared once with its request and answer
// types (Declare), served through Bind and called through Invoke. A new
// command is a new line here, next to its Cmd/Cap constants; a command
// not yet here is listed in TestEveryCommandIsDeclared's untyped list.
var (
	DescribeContract = Declare[None, Contract](CmdDescribeContract, CapDescribeContract)
	Inspect          = Declare[None, Inspection](CmdInspect, CapInspect)
	ListMachines     = Declare[None, MachineList](CmdListMachines, CapListMachines)
	Initialize       = Declare[InitializeRequest, Inspection](CmdInitialize, CapInitialize)
	Join             = Declare[JoinRequest, Inspection](CmdJoin, CapJoin)
	UpdateMachine    = Declare[UpdateMachineRequest, Inspection](CmdUpdateMachine, CapUpdateMachine)
	ForgetMachine    = Declare[ForgetMachineRequest, MachineForgotten](CmdForgetMachine, CapForgetMachine)
	// Reset answers the Machine as it starts resetting.
	Reset          = Declare[None, Inspection](CmdReset, CapReset)
	PublishMachine = Declare[PublishMachineRequest, MachinePublished](CmdPublishMachine, CapPublishMachine)

	ListContainers  = Declare[ListContainersRequest, ContainerList](CmdListContainers, CapListContainers)
	CreateContainer = Declare[CreateContainerRequest, ContainerObservation](CmdCreateContainer, CapCreateContainer)
	StartContainer  = Declare[ContainerRef, ContainerObservation](CmdStartContainer, CapStartContainer)
	WaitReady       = Declare[WaitReadyRequest, WaitReadyResult](CmdWaitReady, CapWaitReady)
	StopContainer   = Declare[StopContainerRequest, ContainerObservation](CmdStopContainer, CapStopContainer)
	RemoveContainer = Declare[RemoveContainerRequest, ContainerRemoved](CmdRemoveContainer, CapRemoveContainer)
	ExportContainer = Declare[ExportContainerRequest, ContainerExport](CmdExportContainer, CapExportContainer)
	ListImages      = Declare[ListImagesRequest, ImageList](CmdListImages, CapListImages)
	PullImage       = Declare[PullImageRequest, PullImageResult](CmdPullImage, CapPullImage)

	// A Method named like its answer type takes a verb: ReadMembership.
	ReadMembership     = Declare[None, Membership](CmdMembership, CapMembership)
	SaltSpecHashes     = Declare[SaltSpecHashesRequest, SaltSpecHashesResult](CmdSaltSpecHashes, CapSaltSpecHashes)
	ReadServingStatus  = Declare[ServingStatusRequest, ServingStatus](CmdServingStatus, CapServingStatus)
	MoveServingPointer = Declare[MoveServingPointerRequest, ServingPointerMoved](CmdMoveServingPointer, CapMoveServingPointer)

	PutJobs  = Declare[PutJobsRequest, JobsPut](CmdPutJobs, CapPutJobs)
	ListJobs = Declare[ListJobsRequest, JobList](CmdListJobs, CapListJobs)

	PutVolumePolicies = Declare[PutVolumePoliciesRequest, VolumePoliciesPut](CmdPutVolumePolicies, CapPutVolumePolicies)

	RecordHistory     = Declare[RecordHistoryRequest, HistoryRecorded](CmdRecordHistory, CapRecordHistory)
	ListHistory       = Declare[ListHistoryRequest, HistoryList](CmdListHistory, CapListHistory)
	SaveRevision      = Declare[SaveRevisionRequest, RevisionSaved](CmdSaveRevision, CapSaveRevision)
	AddCertificate    = Declare[AddCertificateRequest, CertificateView](CmdAddCertificate, CapAddCertificate)
	ListCertificates  = Declare[None, CertificateList](CmdListCertificates, CapListCertificates)
	RemoveCertificate = Declare[RemoveCertificateRequest, CertificatesRemoved](CmdRemoveCertificate, CapRemoveCertificate)
	SetDNSProvider    = Declare[SetDNSProviderRequest, DNSProviderView](CmdSetDNSProvider, CapSetDNSProvider)
	ListDNSProviders  = Declare[None, DNSProviderList](CmdListDNSProviders, CapListDNSProviders)
	RemoveDNSProvider = Declare[RemoveDNSProviderRequest, DNSProviderView](CmdRemoveDNSProvider, CapRemoveDNSProvider)
	ListRevisions     = Declare[ListRevisionsRequest, RevisionList](CmdListRevisions, CapListRevisions)
	PutDeployRecord   = Declare[PutDeployRecordRequest, struct{}](CmdPutDeployRecord, CapPutDeployRecord) // answers {}
	ListDeployRecords = Declare[ListDeployRecordsRequest, DeployRecordList](CmdListDeployRecords, CapListDeployRecords)

	BeginVolumeRun = Declare[BeginVolumeRunRequest, VolumeRunBegun](CmdBeginVolumeRun, CapBeginVolumeRun)
	PutVolumeRun   = Declare[PutVolumeRunRequest, VolumeRunPut](CmdPutVolumeRun, CapPutVolumeRun)
	ListVolumeRuns = Declare[ListVolumeRunsRequest, VolumeRunList](CmdListVolumeRuns, CapListVolumeRuns)

	PutAllocation   = Declare[PutAllocationRequest, Allocation](CmdPutAllocation, CapPutAllocation)
	ListAllocations = Declare[None, Allocations](CmdListAllocations, CapListAllocations)
	MarkRemoval     = Declare[MarkRemovalRequest, RemovalMark](CmdMarkRemoval, CapMarkRemoval)
	ClearRemoval    = Declare[ClearRemovalRequest, struct{}](CmdClearRemoval, CapClearRemoval) // answers {}
	ListRemovals    = Declare[None, RemovalMarks](CmdListRemovals, CapListRemovals)

	AcquireLease = Declare[AcquireLeaseRequest, Lease](CmdAcquireLease, CapAcquireLease)
	RenewLease   = Declare[RenewLeaseRequest, Lease](CmdRenewLease, CapRenewLease)
	ReleaseLease = Declare[ReleaseLeaseRequest, struct{}](CmdReleaseLease, CapReleaseLease) // answers {}
	ListLeases   = Declare[None, Leases](CmdListLeases, CapListLeases)

	// The volume plugin's commands keep its capabilities (sdk/volume).
	CreateVolume   = Declare[CreateVolumeRequest, Volume](CmdCreateVolume, volume.CapCreate)
	RemoveVolume   = Declare[VolumeRequest, VolumeRemoved](CmdRemoveVolume, volume.CapRemove)
	ListVolumes    = Declare[None, VolumeList](CmdListVolumes, volume.CapList)
	InspectVolume  = Declare[VolumeRequest, Volume](CmdInspectVolume, volume.CapInspect)
	SnapshotVolume = Declare[SnapshotVolumeRequest, Volume](CmdSnapshotVolume, volume.CapSnapshot)
	SetVolumeCopy  = Declare[SetVolumeCopyRequest, VolumeCopySet](CmdSetVolumeCopy, CapSetVolumeCopy)
	VolumeTask     = Declare[VolumeTaskRequest, VolumeTaskState](CmdVolumeTask, CapVolumeTask)
	// ployzd's own over the plugin's inspect, and the plugin's Rollback.
	ListVolumeSnapshots = Declare[VolumeRequest, VolumeSnapshots](CmdListVolumeSnapshots, CapListVolumeSnapshots)
	RollbackVolume      = Declare[RollbackVolumeRequest, VolumeRolledBack](CmdRollbackVolume, volume.CapRollback)

	// The observe plugins' commands keep their capabilities (sdk/observe).
	QueryMetrics   = Declare[QueryMetricsRequest, MetricsAnswer](CmdQueryMetrics, observe.CapQueryMetrics)
	ReadLogHistory = Declare[LogHistoryRequest, LogHistory](CmdLogHistory, observe.CapLogHistory)

	ReadUpgradeStatus = Declare[None, UpgradeStatus](CmdUpgradeStatus, CapUpgradeStatus)

	// ingress_status answers the Ingress Proxy's status file as is.
	ReadIngressStatus = Declare[IngressStatusRequest, ingress.Status](CmdIngressStatus, CapIngressStatus)
)

// The streaming commands: each declared with what opens it and the event
// its server sends (DeclareStream), served through BindStream and opened
// through Open. A stream of data only (send_volume) declares None.
var (
	LoadImage         = DeclareStream[None, ImageLoadResult](CmdImageLoad, CapImageLoad)
	RelayImage        = DeclareStream[ImageRelayRequest, ImageRelayEvent](CmdImageRelay, CapImageRelay)
	PullImageProgress = DeclareStream[PullImageRequest, PullImageEvent](CmdPullImageProgress, CapPullImageProgress)
	// Exec's last event is the exit; its data frames carry ExecOutput.
	Exec         = DeclareStream[ExecRequest, ExecExit](CmdExec, CapExec)
	RunContainer = DeclareStream[RunContainerRequest, RunEvent](CmdRunContainer, CapRunContainer)
	TailLogs     = DeclareStream[TailLogsRequest, LogRecord](CmdTailLogs, observe.CapTailLogs)

	SendVolume    = DeclareStream[SendVolumeRequest, None](CmdSendVolume, volume.CapSend)
	ReceiveVolume = DeclareStream[ReceiveVolumeRequest, VolumeReceived](CmdReceiveVolume, volume.CapReceive)
	SendVolumeTo  = DeclareStream[SendVolumeToRequest, VolumeTransfer](CmdSendVolumeTo, CapSendVolumeTo)

	UpgradeMachine = DeclareStream[UpgradeRequest, UpgradeStarted](CmdUpgradeMachine, CapUpgradeMachine)
	UpgradePlugin  = DeclareStream[UpgradeRequest, UpgradeStarted](CmdUpgradePlugin, CapUpgradePlugin)
)
