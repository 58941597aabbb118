
-- The interpreter: walks the layout tables above. Everything about byte layouts is in them.

local election = Proto("zk_election", "ZooKeeper leader election")
local quorum = Proto("zk_quorum", "ZooKeeper quorum port (Zab)")

-- The ports are preferences (Edit > Preferences > Protocols, or `-o zk_election.ports:3889`),
-- defaulting to the ones this file was generated for; "Decode As" works on any other port.
local function port_range(list)
  local parts = {}
  for _, p in ipairs(list) do parts[#parts + 1] = tostring(p) end
  return table.concat(parts, ",")
end
election.prefs.ports = Pref.range("Election ports", port_range(L.election_ports),
  "TCP ports of the election protocol (each server's electionPort, 3888 by default)", 65535)
quorum.prefs.ports = Pref.range("Quorum ports", port_range(L.quorum_ports),
  "TCP ports of the quorum protocol (the leader's quorumPort, 2888 by default)", 65535)

local function make_fields(proto, prefix, forms, extra, more)
  local pf, list = {}, {}
  local function add(f)
    if pf[f.id] then return end
    local abbr = prefix .. "." .. f.id
    local p
    if f.t == "i32" then
      local vs = nil
      if f.id == "state" then vs = L.states elseif f.id == "type" then vs = L.packet_types end
      p = ProtoField.int32(abbr, f.label, base.DEC, vs)
    elseif f.t == "i64" then
      -- zxids in hex, as ZooKeeper logs them (Long.toHexString: unsigned) and as the Info
      -- column shows them; Wireshark shows signed integers in decimal only.
      if f.hex then
        p = ProtoField.uint64(abbr, f.label, base.HEX)
      else
        p = ProtoField.int64(abbr, f.label, base.DEC)
      end
    elseif f.text then
      p = ProtoField.string(abbr, f.label)
    else
      p = ProtoField.bytes(abbr, f.label)
    end
    pf[f.id] = p
    list[#list + 1] = p
  end
  for _, form in ipairs(forms) do for _, f in ipairs(form.fields) do add(f) end end
  for _, f in ipairs(extra) do add(f) end
  pf.form = ProtoField.string(prefix .. ".form", "message form")
  list[#list + 1] = pf.form
  pf.trailing = ProtoField.bytes(prefix .. ".trailing", "trailing bytes (ignored by Java)")
  list[#list + 1] = pf.trailing
  for id, p in pairs(more) do
    pf[id] = p
    list[#list + 1] = p
  end
  proto.fields = list
  return pf
end

local ef = make_fields(election, "zk_election",
  (function() local all = {} for _, f in ipairs(L.initial_forms) do all[#all + 1] = f end
    for _, f in ipairs(L.notification_forms) do all[#all + 1] = f end return all end)(),
  { L.frame_length }, {})
local qf = make_fields(quorum, "zk_quorum",
  (function() local all = { L.quorum_packet } for _, f in ipairs(L.quorum_data_forms) do all[#all + 1] = f end
    return all end)(),
  L.authinfo_id, {
    snapshot = ProtoField.bytes("zk_quorum.snapshot", "snapshot data (streamed after SNAP)"),
    snapshot_end = ProtoField.bool("zk_quorum.snapshot_end", "snapshot signature BenWasHere (end of snapshot)"),
  })

local e_malformed = ProtoExpert.new("zk_election.malformed", "malformed election message",
  expert.group.MALFORMED, expert.severity.ERROR)
local q_malformed = ProtoExpert.new("zk_quorum.malformed", "malformed quorum packet",
  expert.group.MALFORMED, expert.severity.ERROR)
election.experts = { e_malformed }
quorum.experts = { q_malformed }

-- Adds `fields` read from tvb at `off` under `tree`; returns the values by id and the end.
local function walk(tree, tvb, off, limit, fields, pf)
  local v = {}
  for _, f in ipairs(fields) do
    if f.t == "i32" then
      if off + 4 > limit then return nil, off, f.label end
      v[f.id] = tvb(off, 4):int()
      tree:add(pf[f.id], tvb(off, 4))
      off = off + 4
    elseif f.t == "i64" then
      if off + 8 > limit then return nil, off, f.label end
      v[f.id] = tvb(off, 8):int64()
      tree:add(pf[f.id], tvb(off, 8))
      off = off + 8
    else
      local n = v[f.count]
      if n < -1 or off + math.max(n, 0) > limit then return nil, off, f.label end
      if n > 0 then
        tree:add(pf[f.id], tvb(off, n))
        v[f.id] = tvb(off, n)
        off = off + n
      end
    end
  end
  return v, off
end

-- The first item of a dissection of a frame replaces the Info column (TCP's text), later
-- ones are appended. The mark lives in pinfo.private, which each dissection starts empty: a
-- frame dissected again (tshark -2, the GUI on every click) starts over.
local function set_info(pinfo, name, text)
  pinfo.cols.protocol = name
  if pinfo.private.zk_info == nil then
    pinfo.cols.info:set(text)
    pinfo.private.zk_info = "1"
  else
    pinfo.cols.info:append(" | " .. text)
  end
end

local function hex(v)
  return "0x" .. v:tohex():gsub("^0+(.)", "%1")
end

-- ---- election port ----

-- Length of the item at `off` and what it is; nil when more bytes are needed (and how many
-- in all, when known); -1 when the bytes cannot be election traffic. An initial message opens
-- with 0 (legacy: a sid below 2^32) or -1 (the high half of -65536/-65535), which no frame
-- length can be; `first` is true only where one can be: first on the initiator's side.
local function election_item(tvb, off, first)
  local rem = tvb:len() - off
  if rem < 4 then return nil end
  local hi = tvb(off, 4):int()
  if first and (hi == 0 or hi == -1) then
    if rem < 8 then return nil end
    local lo = tvb(off + 4, 4):uint()
    for _, form in ipairs(L.initial_forms) do
      local v = form.when.initial_version
      if v and hi == -1 and lo == v + 4294967296 then
        if rem < 20 then return nil, 20 end
        local len = tvb(off + 16, 4):int()
        if len < 1 or len > L.max_address then return -1 end
        return 20 + len, form
      end
      if form.when.initial_legacy and hi == 0 then return 8, form end
    end
  end
  local len = hi
  if len < 1 or len > L.max_frame then return -1 end
  return 4 + len, "frame"
end

local function notification_form(tvb, off, n)
  for _, form in ipairs(L.notification_forms) do
    if form.when.size == n then return form end
  end
  for _, form in ipairs(L.notification_forms) do
    local min = form.when.config_min
    if min and n >= min and tvb(off + 36, 4):int() >= 2 then return form end
  end
  -- Longer than 40 bytes with a version below 2: Java reads the 40-byte fields only.
  if n > 40 then
    for _, form in ipairs(L.notification_forms) do
      if form.when.size == 40 then return form end
    end
  end
  return nil
end

local function dissect_election_item(tvb, pinfo, tree, off, len, what)
  if what ~= "frame" then
    local sub = tree:add(election, tvb(off, len), what.title)
    sub:add(ef.form, what.id)
    local v = walk(sub, tvb, off, off + len, what.fields, ef)
    local text = "initial message, sid " .. tostring(v.sid)
    if v.addresses then text = text .. ", " .. v.addresses:string() end
    sub:append_text(": " .. text)
    set_info(pinfo, "ZK election", text)
    return
  end
  local n = len - 4
  local form = notification_form(tvb, off + 4, n)
  local sub = tree:add(election, tvb(off, len), form and form.title or "notification (malformed)")
  sub:add(ef.frame_length, tvb(off, 4))
  if not form then
    sub:add_proto_expert_info(e_malformed, "a notification of " .. n .. " bytes: no sender writes this size")
    set_info(pinfo, "ZK election", "malformed notification")
    return
  end
  sub:add(ef.form, form.id)
  local v, at, bad = walk(sub, tvb, off + 4, off + len, form.fields, ef)
  if not v then
    sub:add_proto_expert_info(e_malformed, "bad " .. bad)
    set_info(pinfo, "ZK election", "malformed notification")
    return
  end
  if at < off + len then sub:add(ef.trailing, tvb(at, off + len - at)) end
  local text = (L.states[v.state] or ("UNKNOWN(" .. v.state .. ")")) .. " leader " .. tostring(v.leader) ..
    " round " .. hex(v.election_epoch) .. " zxid " .. hex(v.zxid)
  sub:append_text(": " .. text)
  set_info(pinfo, "ZK election", text)
end

function election.dissector(tvb, pinfo, tree)
  -- Only the initiator, the side that dialled the server's election port, sends an initial
  -- message. That port is the one the TCP port table matched, whether it came from the
  -- preference or from "Decode As"; without one (a heuristic call), either side may.
  local matched = pinfo.match_uint
  local first = matched == nil or matched == 0 or matched == pinfo.dst_port
    or matched ~= pinfo.src_port
  local off = 0
  while off < tvb:len() do
    local len, what = election_item(tvb, off, first)
    if len == nil then
      pinfo.desegment_offset = off
      pinfo.desegment_len = what and (off + what - tvb:len()) or DESEGMENT_ONE_MORE_SEGMENT
      return tvb:len()
    end
    if len < 0 then
      local sub = tree:add(election, tvb(off), "not election traffic")
      sub:add_proto_expert_info(e_malformed, "no frame length or initial message here")
      set_info(pinfo, "ZK election", "not election traffic (or a connection seen from mid-message)")
      return tvb:len()
    end
    if off + len > tvb:len() then
      pinfo.desegment_offset = off
      pinfo.desegment_len = off + len - tvb:len()
      return tvb:len()
    end
    dissect_election_item(tvb, pinfo, tree, off, len, what)
    -- An initial message comes only first: after one, a legacy sid's zero is not one again.
    first = false
    off = off + len
  end
  return off
end

-- ---- quorum port ----

local SIGNATURE = "\0\0\0\10BenWasHere"
local f_stream = Field.new("tcp.stream")
local snap_state = {}   -- direction key -> {carry = string} while a snapshot streams
local frame_start = {}  -- frame/direction -> the state at the frame's start (for revisits)

local function quorum_len(tvb, off)
  local rem = tvb:len() - off
  if rem < 16 then return nil end
  local dl = tvb(off + 12, 4):int()
  if dl < -1 or dl > L.max_packet then return -1 end
  local p = 16 + math.max(dl, 0)
  if rem < p + 4 then return nil, p + 4 end
  local count = tvb(off + p, 4):int()
  p = p + 4
  if count < -1 or count > L.max_authinfo then return -1 end
  for _ = 1, math.max(count, 0) do
    for _ = 1, 2 do
      if rem < p + 4 then return nil end
      local l = tvb(off + p, 4):int()
      if l < -1 or l > L.max_packet then return -1 end
      p = p + 4 + math.max(l, 0)
    end
  end
  if rem < p then return nil, p end
  return p
end

local function dissect_packet(tvb, pinfo, tree, off, len)
  local sub = tree:add(quorum, tvb(off, len), "QuorumPacket")
  local v, at = walk(sub, tvb, off, off + len, L.quorum_packet.fields, qf)
  local name = L.packet_types[v.type] or ("UNKNOWN(" .. v.type .. ")")
  for _ = 1, math.max(v.authinfo_count, 0) do
    local id = sub:add(quorum, tvb(at, 0), "authinfo Id")
    local _, after = walk(id, tvb, at, off + len, L.authinfo_id, qf)
    at = after
  end
  if v.data and v.data_length > 0 then
    for _, form in ipairs(L.quorum_data_forms) do
      for _, t in ipairs(form.when.types) do
        if t == v.type then
          local d = sub:add(quorum, v.data, form.title)
          local start = off + 16
          walk(d, tvb, start, start + v.data_length, form.fields, qf)
        end
      end
    end
  end
  local text = name .. " zxid " .. hex(v.zxid)
  sub:append_text(": " .. text)
  set_info(pinfo, "ZK quorum", text)
  return name
end

function quorum.dissector(tvb, pinfo, tree)
  local key = tostring(f_stream().value) .. ":" .. tostring(pinfo.src_port)
  local fkey = tostring(pinfo.number) .. "/" .. key .. "/" .. tostring(tvb:len())
  local state
  if pinfo.visited then
    state = frame_start[fkey]
  else
    state = snap_state[key]
    frame_start[fkey] = state and { carry = state.carry } or false
  end
  if state then state = { carry = state.carry } else state = nil end
  local off = 0
  while off < tvb:len() do
    if state then
      local raw = tvb:raw(off)
      local hay = state.carry .. raw
      local pos = string.find(hay, SIGNATURE, 1, true)
      if pos then
        local stop = off + pos + #SIGNATURE - 1 - #state.carry
        local sub = tree:add(quorum, tvb(off, stop - off), "snapshot (end)")
        if stop - #SIGNATURE > off then sub:add(qf.snapshot, tvb(off, stop - #SIGNATURE - off)) end
        sub:add(qf.snapshot_end, tvb(math.max(off, stop - #SIGNATURE), stop - math.max(off, stop - #SIGNATURE)), true)
        set_info(pinfo, "ZK quorum", "snapshot end")
        off = stop
        state = nil
      else
        local sub = tree:add(quorum, tvb(off), "snapshot data")
        sub:add(qf.snapshot, tvb(off))
        set_info(pinfo, "ZK quorum", "snapshot data")
        state.carry = string.sub(hay, -(#SIGNATURE - 1))
        off = tvb:len()
      end
    else
      local len, need = quorum_len(tvb, off)
      if len == nil then
        pinfo.desegment_offset = off
        pinfo.desegment_len = need and (off + need - tvb:len()) or DESEGMENT_ONE_MORE_SEGMENT
        break
      end
      if len < 0 then
        local sub = tree:add(quorum, tvb(off), "not a quorum packet")
        sub:add_proto_expert_info(q_malformed, "a length field out of range")
        set_info(pinfo, "ZK quorum", "not a quorum packet (or a connection seen from mid-packet)")
        off = tvb:len()
        break
      end
      local name = dissect_packet(tvb, pinfo, tree, off, len)
      off = off + len
      if name == "SNAP" then state = { carry = "" } end
    end
  end
  if not pinfo.visited then snap_state[key] = state end
  return tvb:len()
end

local tcp_port = DissectorTable.get("tcp.port")
local registered = { [election] = "", [quorum] = "" }
local function register(proto)
  if registered[proto] ~= "" then tcp_port:remove(registered[proto], proto) end
  registered[proto] = proto.prefs.ports
  if registered[proto] ~= "" then tcp_port:add(registered[proto], proto) end
end
register(election)
register(quorum)
election.prefs_changed = function() register(election) end
quorum.prefs_changed = function() register(quorum) end
-- Offered in "Decode As" for any port (Wireshark 2.6 and later).
if tcp_port.add_for_decode_as then
  tcp_port:add_for_decode_as(election)
  tcp_port:add_for_decode_as(quorum)
end
