-- Argo CD health check for dbi.dev/DBInstance and dbi.dev/DBDatabase. Install it in
-- argocd-cm as resource.customizations.health.dbi.dev_DBInstance and
-- resource.customizations.health.dbi.dev_DBDatabase (docs/dbinstance.md, Status).
--
-- It reads the status the way kstatus does: nothing is concluded from a status that
-- describes an older generation (status.observedGeneration, 0 until the first pass).
-- Healthy: Ready at this generation. Suspended: stopped (powerState Stopped, Ready), or
-- dbi.dev/paused. Degraded: Stalled (a Terminal reason; a spec change or `dbi retry`
-- is needed), or a step that could not observe (phase Degraded). Progressing: the rest.
local hs = {status = "Progressing", message = "Waiting for the orchestrator's first pass"}
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Being deleted"
  return hs
end
local status = obj.status
if status == nil then
  return hs
end
local generation = obj.metadata.generation
if status.observedGeneration == nil or status.observedGeneration ~= generation then
  hs.message = "Waiting for the orchestrator to observe generation " .. tostring(generation)
  return hs
end
local found = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    found[condition.type] = condition
  end
end
local function holds(type)
  local condition = found[type]
  return condition ~= nil and condition.status == "True"
end
local function said(type)
  local condition = found[type]
  if condition == nil then
    return ""
  end
  return condition.reason .. ": " .. (condition.message or "")
end
if holds("Stalled") then
  hs.status = "Degraded"
  hs.message = said("Stalled")
elseif holds("Paused") then
  hs.status = "Suspended"
  hs.message = said("Paused")
elseif holds("Ready") and status.phase == "Stopped" then
  hs.status = "Suspended"
  hs.message = "Stopped (spec.powerState)"
elseif holds("Ready") then
  hs.status = "Healthy"
  hs.message = said("Ready")
elseif status.phase == "Degraded" then
  hs.status = "Degraded"
  hs.message = said("Ready")
else
  hs.message = said("Ready")
end
return hs
