//! libpcap, loaded when live capture starts rather than linked.
//!
//! Linking libpcap (as the `pcap` crate does) makes every build of zkfle need libpcap's
//! development files, and every run its shared library, although only `decode --interface`
//! uses it: on a fresh machine `cargo run -- decode capture.pcap` then fails to link. Loading
//! it with `libloading` at the first live capture keeps the rest of zkfle free of it, and a
//! machine without it gets an error naming the package to install. These are the dozen
//! functions of libpcap's stable C API that live capture calls.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use libloading::Library;

/// `PCAP_ERRBUF_SIZE`.
const ERRBUF_SIZE: usize = 256;
/// `PCAP_ERROR_PERM_DENIED`: the capture needs privileges the process lacks.
pub const ERROR_PERM_DENIED: c_int = -8;
/// `PCAP_NETMASK_UNKNOWN`.
const NETMASK_UNKNOWN: c_uint = 0xffff_ffff;

/// The names libpcap's shared library goes by (Debian's runtime package has no `libpcap.so`).
const LIBRARY_NAMES: &[&str] = &[
    "libpcap.so.1",
    "libpcap.so.0.8",
    "libpcap.so",
    "libpcap.A.dylib",
    "libpcap.dylib",
];

/// `struct pcap_pkthdr`.
#[repr(C)]
pub struct PacketHeader {
    pub ts: libc::timeval,
    pub caplen: u32,
    pub len: u32,
}

/// `struct pcap_stat` (its first three fields, which every platform has).
#[repr(C)]
#[derive(Default)]
struct Stat {
    recv: c_uint,
    drop: c_uint,
    ifdrop: c_uint,
    // Windows adds a field; room for it keeps a foreign write in bounds.
    _reserved: c_uint,
}

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    len: c_uint,
    insns: *mut c_void,
}

type Pcap = c_void;

/// The functions used, resolved once.
struct Api {
    create: unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut Pcap,
    set_snaplen: unsafe extern "C" fn(*mut Pcap, c_int) -> c_int,
    set_promisc: unsafe extern "C" fn(*mut Pcap, c_int) -> c_int,
    set_immediate_mode: unsafe extern "C" fn(*mut Pcap, c_int) -> c_int,
    set_buffer_size: unsafe extern "C" fn(*mut Pcap, c_int) -> c_int,
    set_timeout: unsafe extern "C" fn(*mut Pcap, c_int) -> c_int,
    activate: unsafe extern "C" fn(*mut Pcap) -> c_int,
    setnonblock: unsafe extern "C" fn(*mut Pcap, c_int, *mut c_char) -> c_int,
    compile:
        unsafe extern "C" fn(*mut Pcap, *mut BpfProgram, *const c_char, c_int, c_uint) -> c_int,
    setfilter: unsafe extern "C" fn(*mut Pcap, *mut BpfProgram) -> c_int,
    freecode: unsafe extern "C" fn(*mut BpfProgram),
    next_ex: unsafe extern "C" fn(*mut Pcap, *mut *mut PacketHeader, *mut *const u8) -> c_int,
    datalink: unsafe extern "C" fn(*mut Pcap) -> c_int,
    stats: unsafe extern "C" fn(*mut Pcap, *mut Stat) -> c_int,
    get_selectable_fd: unsafe extern "C" fn(*mut Pcap) -> c_int,
    geterr: unsafe extern "C" fn(*mut Pcap) -> *const c_char,
    statustostr: unsafe extern "C" fn(c_int) -> *const c_char,
    close: unsafe extern "C" fn(*mut Pcap),
    // Keeps the library mapped for as long as the pointers above are used (the process).
    _library: Library,
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Api, String> {
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading libpcap runs its initialisers, which have no preconditions.
        match unsafe { Library::new(name) } {
            Ok(library) => return resolve(library).map_err(|e| format!("{name}: {e}")),
            Err(e) => tried.push(e.to_string()),
        }
    }
    Err(format!(
        "libpcap is not installed (tried {}); install it (Debian/Ubuntu: `apt-get install libpcap0.8`, Fedora: `dnf install libpcap`), or capture with tcpdump and decode the file",
        LIBRARY_NAMES.join(", ")
    ))
}

fn resolve(library: Library) -> Result<Api, libloading::Error> {
    // SAFETY: each symbol is libpcap's, with the C signature written in `Api` (libpcap's
    // pcap/pcap.h, stable since 1.0).
    unsafe {
        Ok(Api {
            create: *library.get(b"pcap_create\0")?,
            set_snaplen: *library.get(b"pcap_set_snaplen\0")?,
            set_promisc: *library.get(b"pcap_set_promisc\0")?,
            set_immediate_mode: *library.get(b"pcap_set_immediate_mode\0")?,
            set_buffer_size: *library.get(b"pcap_set_buffer_size\0")?,
            set_timeout: *library.get(b"pcap_set_timeout\0")?,
            activate: *library.get(b"pcap_activate\0")?,
            setnonblock: *library.get(b"pcap_setnonblock\0")?,
            compile: *library.get(b"pcap_compile\0")?,
            setfilter: *library.get(b"pcap_setfilter\0")?,
            freecode: *library.get(b"pcap_freecode\0")?,
            next_ex: *library.get(b"pcap_next_ex\0")?,
            datalink: *library.get(b"pcap_datalink\0")?,
            stats: *library.get(b"pcap_stats\0")?,
            get_selectable_fd: *library.get(b"pcap_get_selectable_fd\0")?,
            geterr: *library.get(b"pcap_geterr\0")?,
            statustostr: *library.get(b"pcap_statustostr\0")?,
            close: *library.get(b"pcap_close\0")?,
            _library: library,
        })
    }
}

/// Why opening a capture failed: libpcap's status code (negative for errors) and its text.
#[derive(Debug)]
pub struct PcapError {
    pub status: c_int,
    pub message: String,
}

impl PcapError {
    fn plain(message: String) -> Self {
        PcapError {
            status: -1,
            message,
        }
    }
}

/// One packet: libpcap's header and the captured bytes, valid until the next read.
pub struct Packet<'a> {
    pub header: &'a PacketHeader,
    pub data: &'a [u8],
}

/// What one non-blocking read gave.
pub enum Read<'a> {
    Packet(Packet<'a>),
    /// No packet waiting.
    Empty,
    /// A savefile's end (not for interfaces).
    End,
}

/// An active live capture (`pcap_t`), closed on drop.
pub struct Capture {
    api: &'static Api,
    handle: *mut Pcap,
}

// SAFETY: a pcap_t may move between threads; it is used from one at a time (`&mut self`).
unsafe impl Send for Capture {}

impl Capture {
    /// Opens `device` for live capture, non-blocking, with immediate delivery, a
    /// `buffer_bytes` kernel buffer and no promiscuous mode, and sets the BPF `filter`.
    pub fn open(
        device: &str,
        snaplen: i32,
        buffer_bytes: i32,
        timeout_ms: i32,
        filter: &str,
    ) -> Result<Capture, PcapError> {
        let api = api().map_err(PcapError::plain)?;
        let device = CString::new(device)
            .map_err(|_| PcapError::plain("the interface name contains a NUL byte".into()))?;
        let mut errbuf = [0 as c_char; ERRBUF_SIZE];
        // SAFETY: a NUL-terminated name and an errbuf of PCAP_ERRBUF_SIZE bytes.
        let handle = unsafe { (api.create)(device.as_ptr(), errbuf.as_mut_ptr()) };
        if handle.is_null() {
            return Err(PcapError::plain(text(errbuf.as_ptr())));
        }
        let capture = Capture { api, handle };
        // SAFETY: `handle` is a created, not yet activated pcap_t for the calls below.
        unsafe {
            (api.set_snaplen)(handle, snaplen);
            (api.set_promisc)(handle, 0);
            (api.set_immediate_mode)(handle, 1);
            (api.set_buffer_size)(handle, buffer_bytes);
            (api.set_timeout)(handle, timeout_ms);
            let status = (api.activate)(handle);
            if status < 0 {
                // Some errors leave pcap_geterr empty; the status text says what it was.
                let mut message = text((api.geterr)(handle));
                let status_text = text((api.statustostr)(status));
                if message.is_empty() {
                    message = status_text;
                } else if !message.contains(&status_text) {
                    message = format!("{status_text}: {message}");
                }
                return Err(PcapError { status, message });
            }
            if (api.setnonblock)(handle, 1, errbuf.as_mut_ptr()) < 0 {
                return Err(PcapError::plain(text(errbuf.as_ptr())));
            }
        }
        capture.set_filter(filter)?;
        Ok(capture)
    }

    fn set_filter(&self, filter: &str) -> Result<(), PcapError> {
        let expr = CString::new(filter)
            .map_err(|_| PcapError::plain("the filter contains a NUL byte".into()))?;
        let mut program = BpfProgram {
            len: 0,
            insns: std::ptr::null_mut(),
        };
        // SAFETY: an activated handle, a NUL-terminated expression and a program that
        // pcap_compile fills and pcap_freecode frees.
        unsafe {
            if (self.api.compile)(self.handle, &mut program, expr.as_ptr(), 1, NETMASK_UNKNOWN) < 0
            {
                return Err(PcapError::plain(format!(
                    "filter {filter:?}: {}",
                    text((self.api.geterr)(self.handle))
                )));
            }
            let status = (self.api.setfilter)(self.handle, &mut program);
            (self.api.freecode)(&mut program);
            if status < 0 {
                return Err(PcapError::plain(format!(
                    "filter {filter:?}: {}",
                    text((self.api.geterr)(self.handle))
                )));
            }
        }
        Ok(())
    }

    /// The next packet, if one is waiting.
    pub fn read(&mut self) -> Result<Read<'_>, String> {
        let mut header: *mut PacketHeader = std::ptr::null_mut();
        let mut data: *const u8 = std::ptr::null();
        // SAFETY: an activated handle and two out-pointers pcap_next_ex sets on success.
        let status = unsafe { (self.api.next_ex)(self.handle, &mut header, &mut data) };
        match status {
            1 if !header.is_null() && !data.is_null() => {
                // SAFETY: on success both point into libpcap's buffer until the next call,
                // which `&mut self` rules out while the packet is borrowed; caplen is the
                // number of bytes at `data`.
                let header = unsafe { &*header };
                let data = unsafe { std::slice::from_raw_parts(data, header.caplen as usize) };
                Ok(Read::Packet(Packet { header, data }))
            }
            0 | 1 => Ok(Read::Empty),
            -2 => Ok(Read::End),
            // SAFETY: an activated handle.
            _ => Err(text(unsafe { (self.api.geterr)(self.handle) })),
        }
    }

    /// The link-layer type of the packets (a LINKTYPE_ value).
    pub fn datalink(&self) -> c_int {
        // SAFETY: an activated handle.
        unsafe { (self.api.datalink)(self.handle) }
    }

    /// Packets the filter passed, and packets dropped (by the kernel or the interface).
    pub fn stats(&self) -> Option<(u32, u32)> {
        let mut stat = Stat::default();
        // SAFETY: an activated handle and a pcap_stat to fill.
        if unsafe { (self.api.stats)(self.handle, &mut stat) } < 0 {
            return None;
        }
        Some((stat.recv, stat.drop.saturating_add(stat.ifdrop)))
    }

    /// A descriptor to poll for readability (-1 where the platform has none).
    pub fn selectable_fd(&self) -> c_int {
        // SAFETY: an activated handle.
        unsafe { (self.api.get_selectable_fd)(self.handle) }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // SAFETY: the handle came from pcap_create and is closed once.
        unsafe { (self.api.close)(self.handle) }
    }
}

/// A C string from libpcap as text (empty for NULL).
fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libpcap returns NUL-terminated strings (error buffers and static texts).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
