"""The VM stand-in's control loop: KubeVirt's and the storage provisioner's part.

Dev and test infrastructure, never used in production. It watches VirtualMachines,
their VMIs and all PVCs on the local control plane, and for each VM that should run
boots a real PostgreSQL (``guest.Guest``) on the VM's own loopback address (a new one
at each restart, as a new virt-launcher pod gets), writing VMI and VM status as
KubeVirt does, and forwards each Service's ClusterIP to the guest it selects
(``services.py``: kube-proxy's part). It plays the storage provisioner too
(``storage.py``): volumes for claims, bound, expanded and reclaimed. Work is
level-driven: every VM is reconciled on each event of it or its VMI, and a short resync
reconciles each VM that may need it (``needs_look``): one not yet reconciled as it is
now, a guest booting (its readiness comes with no event), a guest that has died or that
should not run. A VM running as it should is left alone, as KubeVirt's virt-handler does
not poll the guest of a VM that has not changed: the guests
share the cores of the orchestrator on this machine.
"""

from __future__ import annotations

import base64
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import watch

from activities.infra.manifests import IMAGE_ANNOTATION
from dbi.bootstrap import USERDATA_KEY, Bootstrap, from_userdata
from devstack import postgresql, tools
from devstack.vmstandin import kubevirt
from devstack.vmstandin.addresses import Addresses
from devstack.vmstandin.guest import Guest, make_traversable
from devstack.vmstandin.kubevirt import Manifest
from devstack.vmstandin.qemu import Caches, QemuGuest
from devstack.vmstandin.services import Forwarders
from devstack.vmstandin.storage import Storage, or_none
from images import build as images

log = logging.getLogger("devstack.vmstandin")

KUBEVIRT = ("kubevirt.io", "v1")
RESYNC_SECONDS = 1.0


@dataclass(frozen=True)
class Image:
    """What the stand-in needs of a VM's image: the PostgreSQL build, and whether the
    VM boots on qemu from dbi's image of that build (``devstack.vmstandin.qemu``)."""

    version: str
    qemu: bool = False


@dataclass
class VM:
    """What the stand-in remembers of one VM between reconciles."""

    guest: Guest | QemuGuest
    vmi_uid: str | None = None
    crash_seen: str | None = None
    written: dict[str, str] = field(default_factory=dict)
    # The VM's resourceVersion when last reconciled, and whether the guest of this boot
    # has been seen ready: what the resync needs to leave a settled VM alone.
    version: str | None = None
    ready_seen: bool = False
    # The VMI waits for a node that can hold it (see ``StandIn._unschedulable``).
    unschedulable: bool = False
    # Where the VM is and what its pods are labelled (Services select by them), and how
    # often this stand-in booted it: each boot after the first takes a new address.
    namespace: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    boots: int = 0


def needs_look(vm: Manifest, state: VM | None) -> bool:
    """Tell whether the resync should reconcile ``vm`` (pure, but for the guest's
    process), given what the stand-in remembers of it (None: never reconciled)."""
    if state is None or vm["metadata"].get("resourceVersion") != state.version:
        return True
    if kubevirt.wants_to_run(vm):
        if state.unschedulable:
            return False  # it waits for a change of the VM, which comes with an event
        return not (state.guest.running() and state.ready_seen)  # booting, died, not started
    return state.guest.running()  # should stop


class StandIn:
    def __init__(
        self,
        api: Any,
        data_dir: Path,
        node_memory: int | None = None,
        images_cache: Path | None = None,
        exporter: Path | None = None,
    ) -> None:
        self.api = api
        self.exporter = exporter  # postgres_exporter, run beside each process guest
        self.images_cache = images_cache or images.default_cache()
        # The one node's allocatable memory: a VM asking for more is never scheduled.
        self.node_memory = node_memory or kubevirt.host_memory_bytes()
        self.objects = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.data_dir = data_dir
        self.disks = data_dir / "disks"
        self.disks.mkdir(parents=True, exist_ok=True)
        make_traversable(self.disks)
        self.storage = Storage(self.core, k8s.StorageV1Api(api), self.disks)
        self.addresses = Addresses(data_dir / "addresses.json")
        self.vms: dict[str, VM] = {}
        self.forwarders = Forwarders(self.backend)
        self.queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._busy: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    # The loop -------------------------------------------------------------------

    def run(self, *, workers: int = 4, ready: Callable[[], None]) -> None:
        """Watch and reconcile until ``stopping`` is set, then stop every guest."""
        threads = [
            threading.Thread(target=self._watch_forever, args=(kind,), daemon=True)
            for kind in ("virtualmachines", "virtualmachineinstances", "pvcs", "services")
        ]
        threads += [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for t in threads:
            t.start()
        ready()
        while not self.stopping.wait(RESYNC_SECONDS):
            self._resync()
        self.forwarders.close()
        stopping = [threading.Thread(target=vm.guest.stop) for vm in list(self.vms.values())]
        for t in stopping:  # together: a qemu VM's shutdown takes seconds
            t.start()
        for t in stopping:
            t.join()

    def backend(self, namespace: str, selector: dict[str, str]) -> str | None:
        """The address of a running guest whose pods a Service's selector picks (what
        kube-proxy finds in the Service's ready endpoints), or None."""
        for vm in list(self.vms.values()):
            picked = vm.namespace == namespace and selector.items() <= vm.labels.items()
            if picked and vm.ready_seen and vm.guest.running():
                return vm.guest.address
        return None

    def enqueue(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
        self.queue.put(key)

    def _work(self) -> None:
        while not self.stopping.is_set():
            try:
                key = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            with self._lock:
                self._queued.discard(key)
                if key in self._busy:  # another worker has it; look again soon
                    self._queued.add(key)
                    self.queue.put(key)
                    continue
                self._busy.add(key)
            try:
                self.reconcile(*key)
            except Exception:
                log.exception("while reconciling VirtualMachine %s/%s", *key)
            finally:
                with self._lock:
                    self._busy.discard(key)

    def _resync(self) -> None:
        try:
            listed = cast(
                Manifest, self.objects.list_cluster_custom_object(*KUBEVIRT, "virtualmachines")
            )
            vms = listed["items"]
            for vm in vms:
                if needs_look(vm, self.vms.get(vm["metadata"]["uid"])):
                    self.enqueue(vm["metadata"]["namespace"], vm["metadata"]["name"])
            known = {vm["metadata"]["uid"] for vm in vms}
            for uid in set(self.vms) - known:
                self.vms.pop(uid).guest.stop()
                self.addresses.release(uid)
            self._collect_disks()
        except Exception:
            log.exception("while resyncing")

    def _watch_forever(self, kind: str) -> None:
        while not self.stopping.is_set():
            try:
                for event in self._stream(kind):
                    if kind == "services":
                        self.forwarders.sync(event["type"], event["raw_object"])
                        continue
                    self._on_event(kind, event["object"])
            except Exception as e:  # a dropped watch or 410 Gone: list again
                log.info("watch of %s restarts: %s", kind, e)
                time.sleep(0.5)

    def _stream(self, kind: str) -> Iterator[dict[str, Any]]:
        w = watch.Watch()
        if kind == "pvcs":
            stream = w.stream(
                self.core.list_persistent_volume_claim_for_all_namespaces, timeout_seconds=300
            )
        elif kind == "services":
            stream = w.stream(self.core.list_service_for_all_namespaces, timeout_seconds=300)
        else:
            stream = w.stream(
                self.objects.list_cluster_custom_object, *KUBEVIRT, kind, timeout_seconds=300
            )
        return cast(Iterator[dict[str, Any]], stream)

    def _on_event(self, kind: str, obj: Any) -> None:
        if kind == "pvcs":
            try:
                self.bind(obj)
            except k8s.ApiException as e:  # one claim's trouble must not stop the watch
                log.warning("while binding claim %s: %s", obj.metadata.name, e.reason)
            return
        meta = obj["metadata"]
        self.enqueue(meta["namespace"], meta["name"])

    # Storage --------------------------------------------------------------------

    def bind(self, pvc: Any) -> None:
        """Provision, bind and expand a claim's volume (``storage.Storage.bind``)."""
        self.storage.bind(pvc)

    def _collect_disks(self) -> None:
        """Reclaim volumes whose claims are gone and remove the disks of deleted volumes
        (and of claim-less VMs that no longer exist), but never a running guest's."""
        vms = dict(self.vms)  # a copy: reconciling threads add VMs meanwhile
        keep = {f"vm-{uid}" for uid in vms}
        keep |= {vm.guest.disk.name for vm in vms.values() if vm.guest.running()}
        self.storage.reclaim(keep)

    # One VM ---------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> None:
        """Converge one VM: its guest, its VMI and both statuses (see the module doc)."""
        vm = self._get(namespace, name)
        if vm is None or vm["metadata"].get("deletionTimestamp"):
            return
        state = self._state(vm)
        if state is None:
            return  # its data claim is not bound yet; the resync looks again
        state.version = vm["metadata"].get("resourceVersion")
        vmi = self._get(namespace, name, "virtualmachineinstances")
        if not kubevirt.wants_to_run(vm):
            self._halt(vm, state, vmi)
            return
        self._inject_crash(vm, state)
        if vm["metadata"].get("annotations", {}).get(kubevirt.FAIL_BOOT_ANNOTATION):
            self._fail_boot(vm, state, vmi)
            return
        if self._waits_for_a_node(vm, state, vmi):
            return
        failed = vmi is not None and vmi.get("status", {}).get("phase") == "Failed"
        if vmi is None or vmi["metadata"]["uid"] != state.vmi_uid or failed or state.guest.exited():
            self._start(vm, state, vmi)
            return
        self._observe(vm, state, vmi)

    def _state(self, vm: Manifest) -> VM | None:
        """What the stand-in keeps of the VM; None while its data claim is not bound (the
        guest's disk is the claim's volume) or its image cannot be read."""
        uid = vm["metadata"]["uid"]
        if uid not in self.vms:
            claim = kubevirt.data_claim(kubevirt.template_spec(vm))
            disk = (
                self.storage.disk_of(vm["metadata"]["namespace"], claim)
                if claim
                else self.disks / f"vm-{uid}"
            )
            image = self._image(vm)
            if disk is None or image is None:
                return None
            self.vms[uid] = VM(
                namespace=vm["metadata"]["namespace"],
                guest=self._guest(vm, disk, image),
            )
        template = vm.get("spec", {}).get("template", {})
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        # KubeVirt labels a VM's pods with the VM's name.
        self.vms[uid].labels = {**labels, "vm.kubevirt.io/name": vm["metadata"]["name"]}
        return self.vms[uid]

    def _guest(self, vm: Manifest, disk: Path, image: Image) -> Guest | QemuGuest:
        """A process-mode guest, or a qemu VM for an image labelled so (``kubevirt.QEMU_LABEL``)."""
        meta = vm["metadata"]
        logs = self.data_dir / "logs"
        if image.qemu:
            return QemuGuest(
                version=image.version,
                disk=disk,
                address=self.addresses.of(meta["uid"]),
                log_path=logs / f"{meta['namespace']}_{meta['name']}.console.log",
                caches=Caches(images=self.images_cache, builds=tools.CACHE_DIR),
                name=f"{meta['namespace']}/{meta['name']}",
            )
        return Guest(
            version=image.version,
            disk=disk,
            address=self.addresses.of(meta["uid"]),
            log_path=logs / f"{meta['namespace']}_{meta['name']}.log",
            exporter=self.exporter,
        )

    def _image(self, vm: Manifest) -> Image | None:
        """The PostgreSQL build the VM's image names (the Harvester imageId annotation of
        the claim it boots, its root disk's or a one-disk VM's data disk's; the image's
        ``dbi.dev/postgresql-version`` label), and whether it boots on qemu (its
        ``kubevirt.QEMU_LABEL``); the default when it names none; None when
        the claim or the image it names cannot be read now (a boot then waits: booting
        another build on the data would be wrong)."""
        namespace, spec = vm["metadata"]["namespace"], kubevirt.template_spec(vm)
        claim = kubevirt.root_claim(spec) or kubevirt.data_claim(spec)
        pvc = (
            or_none(lambda: self.core.read_namespaced_persistent_volume_claim(claim, namespace))
            if claim
            else None
        )
        if claim and pvc is None:
            return None
        image_id = ((pvc.metadata.annotations or {}) if pvc and pvc.metadata else {}).get(
            IMAGE_ANNOTATION, ""
        )
        image_namespace, _, image_name = image_id.partition("/")
        image = (
            or_none(
                lambda: self.objects.get_namespaced_custom_object(
                    "harvesterhci.io",
                    "v1beta1",
                    image_namespace,
                    "virtualmachineimages",
                    image_name,
                )
            )
            if image_name
            else None
        )
        if image_name and image is None:
            return None
        labels = ((image or {}).get("metadata") or {}).get("labels") or {}
        return Image(
            version=str(labels.get(postgresql.VERSION_LABEL) or postgresql.VERSION),
            qemu=labels.get(kubevirt.QEMU_LABEL) == "qemu",
        )

    def _halt(self, vm: Manifest, state: VM, vmi: Manifest | None) -> None:
        if state.guest.running():
            self._vm_status(vm, state, "Stopping", ready=False, restart=False)
            state.guest.stop()
        if vmi is not None:
            self._delete_vmi(vm)
        state.vmi_uid = None
        state.unschedulable = False
        self._vm_status(vm, state, "Stopped", ready=False, restart=False)

    def _inject_crash(self, vm: Manifest, state: VM) -> None:
        token = vm["metadata"].get("annotations", {}).get(kubevirt.CRASH_ANNOTATION)
        if token and token != state.crash_seen:
            state.crash_seen = token
            log.info(
                "crashing %s/%s on request", vm["metadata"]["namespace"], vm["metadata"]["name"]
            )
            state.guest.crash()

    def _fail_boot(self, vm: Manifest, state: VM, vmi: Manifest | None) -> None:
        state.guest.stop()
        if vmi is None:
            vmi = self._create_vmi(vm, state)
        size = kubevirt.size_of(kubevirt.template_spec(vm))
        self._vmi_status(
            vm, state, kubevirt.vmi_status("Failed", address=None, size=size, ready=False)
        )
        self._vm_status(vm, state, "CrashLoopBackOff", ready=False, restart=False)

    def _start(self, vm: Manifest, state: VM, vmi: Manifest | None) -> None:
        """Boot (or reboot) the guest with the template as it is now, in a fresh VMI."""
        image = self._image(vm)
        if image is None:  # its disk or image cannot be read now: the resync looks again
            log.info("%s waits: its image cannot be read yet", vm["metadata"]["name"])
            return
        if image.qemu != isinstance(state.guest, QemuGuest):
            log.warning(
                "%s cannot boot: its disk was made for %s and its image boots %s",
                vm["metadata"]["name"],
                "qemu" if isinstance(state.guest, QemuGuest) else "a process",
                "qemu" if image.qemu else "a process",
            )
            return
        build = image.version
        if state.guest.exited():
            # A crash: KubeVirt marks the VMI Failed, then both run strategies restart it.
            state.guest.forget()
            if vmi is not None:
                size = kubevirt.size_of(vmi.get("spec", {}))
                self._vmi_status(
                    vm, state, kubevirt.vmi_status("Failed", address=None, size=size, ready=False)
                )
        state.guest.stop()
        failed = vmi is not None and vmi.get("status", {}).get("phase") == "Failed"
        if vmi is not None and (vmi["metadata"]["uid"] == state.vmi_uid or failed):
            self._delete_vmi(vm)  # KubeVirt replaces a VMI that ran or failed
            vmi = None
        bootstrap = self._bootstrap(vm)
        if bootstrap is None:
            return
        if vmi is None:
            vmi = self._create_vmi(vm, state)
        state.vmi_uid = vmi["metadata"]["uid"]
        if not self._fits(vm):
            self._unschedulable(vm, state)
            return
        self._vm_status(vm, state, "Starting", ready=False, restart=False)
        self._prepare(vm, state, bootstrap, build, kubevirt.size_of(vmi["spec"]))
        state.ready_seen = False
        if state.boots:  # a restart: a new pod, a new address (KubeVirt's too)
            state.guest.address = self.addresses.renew(vm["metadata"]["uid"])
        state.boots += 1
        state.guest.boot(kubevirt.size_of(vmi["spec"]))

    def _prepare(
        self, vm: Manifest, state: VM, bootstrap: Bootstrap, build: str, size: kubevirt.Size
    ) -> None:
        """The guest program's boot (``python -m guest``, an image's dbi-bootstrap) on
        the root disk of ``build``'s image: initdb (or a restore) once, an upgrade or a
        reset the boot data asks for, TLS, the size's settings."""
        state.guest.use(build)  # the root disk may be a new one
        said = state.guest.prepare(bootstrap, size)
        if said.get("reset"):
            log.info("reset the admin password of %s", vm["metadata"]["name"])
        if said.get("upgrade"):
            log.info("upgrade of %s: %s", vm["metadata"]["name"], said["upgrade"])

    def _waits_for_a_node(self, vm: Manifest, state: VM, vmi: Manifest | None) -> bool:
        """Whether the VM's VMI waits, unschedulable, for a node; one that fits now
        (its template changed) gets a new VMI, as after a restart."""
        this = vmi is not None and vmi["metadata"]["uid"] == state.vmi_uid
        if not (state.unschedulable and this):
            return False
        if self._fits(vm):
            state.unschedulable = False
            self._start(vm, state, vmi)
        return True

    def _fits(self, vm: Manifest) -> bool:
        """Whether the one node can hold the VM's guest memory."""
        return kubevirt.size_of(kubevirt.template_spec(vm)).memory_bytes <= self.node_memory

    def _unschedulable(self, vm: Manifest, state: VM) -> None:
        """No node can hold the VM: its VMI stays Scheduling, as KubeVirt's does while
        its virt-launcher pod is Pending, and the VM says ErrorUnschedulable."""
        state.unschedulable = True
        state.guest.stop()
        message = "0/1 nodes are available: 1 Insufficient memory."
        self._vmi_status(vm, state, kubevirt.vmi_unschedulable(message))
        self._vm_status(vm, state, "ErrorUnschedulable", ready=False, restart=False)

    def _observe(self, vm: Manifest, state: VM, vmi: Manifest) -> None:
        """Follow a booted guest: readiness, live resizes, and RestartRequired."""
        template = kubevirt.template_spec(vm)
        change = kubevirt.compare(template, vmi["spec"])
        # A qemu VM takes no live change: KubeVirt says RestartRequired where it cannot.
        restart = change.restart_required or (change.live and not state.guest.live_resize)
        if change.live and state.guest.live_resize:
            vmi["spec"] = kubevirt.apply_live(template, vmi["spec"])
            self.objects.patch_namespaced_custom_object(
                *KUBEVIRT,
                vm["metadata"]["namespace"],
                "virtualmachineinstances",
                vm["metadata"]["name"],
                {"spec": {"domain": vmi["spec"]["domain"]}},
            )
            state.guest.write_size(kubevirt.size_of(vmi["spec"]))
        ready = state.guest.ready()
        state.ready_seen = ready
        size = kubevirt.size_of(vmi["spec"])
        phase = "Running" if ready else "Scheduled"
        self._vmi_status(
            vm,
            state,
            kubevirt.vmi_status(phase, address=state.guest.address, size=size, ready=ready),
        )
        printable = "Running" if ready else "Starting"
        self._vm_status(vm, state, printable, ready=ready, restart=restart)

    def _bootstrap(self, vm: Manifest) -> Bootstrap | None:
        secret_name = kubevirt.cloud_init_secret(kubevirt.template_spec(vm))
        if secret_name is None:
            log.warning("VM %s has no cloud-init Secret; it cannot boot", vm["metadata"]["name"])
            return None
        try:
            secret = self.core.read_namespaced_secret(secret_name, vm["metadata"]["namespace"])
            raw = base64.b64decode((secret.data or {})[USERDATA_KEY]).decode()
            return from_userdata(raw)
        except (k8s.ApiException, KeyError, ValueError) as e:
            log.warning(
                "VM %s waits for its cloud-init Secret %s: %s",
                vm["metadata"]["name"],
                secret_name,
                type(e).__name__,
            )
            return None

    # API writes -----------------------------------------------------------------

    def _get(self, namespace: str, name: str, plural: str = "virtualmachines") -> Manifest | None:
        try:
            found = self.objects.get_namespaced_custom_object(*KUBEVIRT, namespace, plural, name)
        except k8s.ApiException as e:
            if e.status == 404:
                return None
            raise
        return cast(Manifest, found)

    def _create_vmi(self, vm: Manifest, state: VM) -> Manifest:
        created = self.objects.create_namespaced_custom_object(
            *KUBEVIRT,
            vm["metadata"]["namespace"],
            "virtualmachineinstances",
            kubevirt.vmi_manifest(vm),
        )
        state.written.pop("vmi", None)
        return cast(Manifest, created)

    def _delete_vmi(self, vm: Manifest) -> None:
        try:
            self.objects.delete_namespaced_custom_object(
                *KUBEVIRT,
                vm["metadata"]["namespace"],
                "virtualmachineinstances",
                vm["metadata"]["name"],
            )
        except k8s.ApiException as e:
            if e.status != 404:
                raise

    def _vmi_status(self, vm: Manifest, state: VM, status: Manifest) -> None:
        signature = _signature(status)
        if state.written.get("vmi") == signature:
            return
        self.objects.patch_namespaced_custom_object(
            *KUBEVIRT,
            vm["metadata"]["namespace"],
            "virtualmachineinstances",
            vm["metadata"]["name"],
            {"status": status},
        )
        state.written["vmi"] = signature

    def _vm_status(
        self, vm: Manifest, state: VM, printable: str, *, ready: bool, restart: bool
    ) -> None:
        created = printable not in ("Stopped",)
        status = kubevirt.vm_status(
            printable, ready=ready, restart_required=restart, created=created
        )
        signature = _signature(status)
        if state.written.get("vm") == signature:
            return
        self.objects.patch_namespaced_custom_object_status(
            *KUBEVIRT,
            vm["metadata"]["namespace"],
            "virtualmachines",
            vm["metadata"]["name"],
            {"status": status},
        )
        state.written["vm"] = signature


def _signature(status: Manifest) -> str:
    """Return what identifies a status, without timestamps: unchanged ones are not rewritten."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions", [])
    ]
    return json.dumps({**status, "conditions": conditions}, sort_keys=True)
