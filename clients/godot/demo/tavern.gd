## The tavern: Marta the innkeeper and Brann the guard, two NPCs on the `Oamd` autoload.
##
## Every param the scene sends comes from `tavern.json` (personas, tools, options, the scripted
## models); `tests/test_godot_demo.py` reads the same file and plays the same calls against the
## daemon. What the scene shows: Marta's bark as the player walks in; streamed subtitles that
## honour the daemon's resets (`Oamd.npc_line_changed`); the emotion; the player's options as
## buttons; Marta's `place_order` tool, which the game answers from its own state; a world value
## (the player's bounty) that a game event writes and Brann reads; Brann's `decision/decide`;
## save and load through `npc/state` and `npc/restore`.
extends Control

## Where the scene's data is (Godot loads `.json` as a resource, so an export packs it).
const TAVERN_PATH := "res://tavern.json"
## Where Save writes the NPCs' states, the world and the game's purse.
const SAVE_PATH := "user://tavern_save.json"
const SAVE_VERSION := 1
## The daemon's model when `scripted_models` is off: a catalog model (`oamd models list`) that
## the daemon fetches itself the first time it is asked for (`pull=on-request`).
const DAEMON_MODEL := "llamacpp:smollm2-360m-instruct?pull=on-request"

## On: each NPC, and Brann's decision, runs on the scripted model `tavern.json` holds for it, so
## the scene plays the same way every time with the `make dist` executable and no model file
## (a script's lines follow the walkthrough of README.md). Off: the NPCs speak through the
## daemon's own model, started with `daemon_args`.
@export var scripted_models := true
## The daemon's arguments after `oamd stdio` when `scripted_models` is off: by default the
## embedded llama.cpp (`make dist-llama`) on `DAEMON_MODEL`, whose first download shows in the
## progress bar.
@export var daemon_args := PackedStringArray(["--model", DAEMON_MODEL])
## The oamd executable; empty: `Oamd.default_executable()` (`res://oamd/oamd` in the editor).
@export var executable_path := ""

var _tavern := {}
var _copper := 0  # the player's purse: game state, which Marta's place_order tool spends
var _bounty := 0
var _regard := 0  # Marta's relationship with the player, from her last turn
var _speaker := ""  # the NPC whose subtitle is shown

@onready var _status: Label = %Status
@onready var _progress: ProgressBar = %ModelProgress
@onready var _speaker_label: Label = %Speaker
@onready var _subtitle: Label = %Subtitle
@onready var _emotion: Label = %Emotion
@onready var _options: VBoxContainer = %Options
@onready var _actions: HBoxContainer = %Actions


func _ready() -> void:
	var tavern = JSON.parse_string(FileAccess.get_file_as_string(TAVERN_PATH))
	if not tavern is Dictionary:
		_say_aside("Cannot read %s." % TAVERN_PATH)
		return
	_tavern = tavern
	Oamd.tool_handlers["place_order"] = _place_order
	Oamd.npc_event.connect(_on_npc_event)
	Oamd.npc_line_changed.connect(_on_npc_line_changed)
	Oamd.model_progress.connect(_on_model_progress)
	Oamd.connection_failed.connect(_on_error)
	%TalkMarta.pressed.connect(_talk.bind("marta", ""))
	%TalkBrann.pressed.connect(_talk.bind("brann", str(_tavern["game"]["guardLine"])))
	%Brawl.pressed.connect(_brawl)
	%Decide.pressed.connect(_decide)
	%Save.pressed.connect(_save)
	%Load.pressed.connect(_load)
	_busy(true)
	await _open_tavern()
	_busy(false)


# A daemon of its own, the world, both NPCs, and Marta's bark as the player walks in.
func _open_tavern() -> bool:
	_copper = int(_tavern["game"]["copper"])
	if not await _start_daemon():
		return false
	var world: Dictionary = _tavern["world"]
	if not _ok(await Oamd.world_create(world["world"], world["state"])):
		return false
	for npc in _tavern["npcs"]:
		if not _ok(await _create_npc(npc)):
			return false
	var bark: Dictionary = await Oamd.call_method("npc/bark", _tavern["bark"])
	if not _ok(bark):
		return false
	_show_line(str(_tavern["bark"]["npc"]), bark["result"]["line"])
	_update_status()
	return true


# `Oamd.spawn` ends the daemon before, so this is also a fresh daemon for a loaded game. When the
# NPCs use the daemon's model, waits until it is ready (downloading it the first time).
func _start_daemon() -> bool:
	var args := [] if scripted_models else Array(daemon_args)
	if Oamd.spawn(executable_path, args) != OK:
		return false  # connection_failed said why
	if scripted_models:
		return true  # the NPCs bring their own models; the daemon's is not needed
	_progress.visible = true
	var reply: Dictionary = await Oamd.wait_for_model()
	_progress.visible = false
	if not _ok(reply):
		return false
	if not reply["result"]["available"]:
		_say_aside("No model: %s" % reply["result"].get("detail", reply["result"].get("reason")))
		return false
	return true


func _create_npc(npc: Dictionary) -> Dictionary:
	var create: Dictionary = npc["create"]
	var extra := {
		"tools": create.get("tools", []),
		"world": create["world"],
		"options": create["options"],
	}
	if scripted_models:
		extra["model"] = npc["model"]
	return await Oamd.npc_create(create["npc"], create["persona"], extra)


# The player says `line` ("" to say nothing) to `npc`; the reply streams into the subtitle.
func _talk(npc: String, line: String) -> void:
	_busy(true)
	_show_line(npc, "")
	for button in _options.get_children():
		button.queue_free()
	var reply: Dictionary = await Oamd.npc_talk(npc, line, {"stream": true})
	_busy(false)
	if not _ok(reply):
		return
	var result: Dictionary = reply["result"]
	_show_line(npc, result["line"])  # what stands, whatever streamed before it
	_emotion.text = result["emotion"]
	if npc == "marta":
		_regard = int(result["relationship"])
	if not result["endsConversation"]:
		for option in result["playerOptions"]:
			var button := Button.new()
			button.text = option
			button.pressed.connect(_talk.bind(npc, option))
			_options.add_child(button)
	_update_status()


# A game event: a brawl raises the bounty in the world, which Brann reads when he next speaks.
func _brawl() -> void:
	var brawl: Dictionary = _tavern["game"]["brawl"]
	var world: String = _tavern["world"]["world"]
	if _ok(await Oamd.world_set(world, brawl["path"], brawl["value"])):
		_bounty = int(brawl["value"])
		_say_aside("A mug flies across the room. Brann saw who threw it.")
		_update_status()


func _decide() -> void:
	_busy(true)
	await _guard_decides()
	_busy(false)


func _save() -> void:
	_busy(true)
	await _save_game()
	_busy(false)


func _load() -> void:
	_busy(true)
	await _load_game()
	_busy(false)


# Brann decides what to do about the player; the game hands him the world's view of them.
func _guard_decides() -> void:
	var decision: Dictionary = _tavern["decision"]
	var decide: Dictionary = decision["decide"]
	var player: Dictionary = await Oamd.world_get(_tavern["world"]["world"], "player")
	if not _ok(player):
		return
	var extra := {
		"actor": decide["actor"],
		"context": {"player": player["result"]["value"]},
		"fallbackOptionID": decide["fallbackOptionID"],
	}
	if scripted_models:
		extra["model"] = decision["model"]
	var reply: Dictionary = await Oamd.decide(decide["situation"], decide["options"], extra)
	if _ok(reply):
		var result: Dictionary = reply["result"]
		var chosen := "Brann decides: %s (%d%%). %s"
		_say_aside(chosen % [result["optionID"], int(result["confidence"]), result["reasoning"]])


# The world, each NPC's state (persona, memory, relationship, conversation) and the purse.
func _save_game() -> void:
	var world: String = _tavern["world"]["world"]
	var snapshot: Dictionary = await Oamd.call_method("world/snapshot", {"world": world})
	if not _ok(snapshot):
		return
	var save := {"version": SAVE_VERSION, "game": {"copper": _copper}, "npcs": {}}
	save["world"] = snapshot["result"]["state"]
	for npc in _tavern["npcs"]:
		var id: String = npc["create"]["npc"]
		var state: Dictionary = await Oamd.call_method("npc/state", {"npc": id})
		if not _ok(state):
			return
		save["npcs"][id] = state["result"]["state"]
	var file := FileAccess.open(SAVE_PATH, FileAccess.WRITE)
	if file == null:
		_say_aside("Cannot write %s: %s" % [SAVE_PATH, error_string(FileAccess.get_open_error())])
		return
	file.store_string(JSON.stringify(save))
	file.close()
	_say_aside("Saved to %s." % ProjectSettings.globalize_path(SAVE_PATH))


# Loads into a fresh daemon, as a game started again from its save would: the world first (the
# NPCs' states name it), then each NPC with its memory, relationship and conversation.
func _load_game() -> void:
	var save = JSON.parse_string(FileAccess.get_file_as_string(SAVE_PATH))
	if not save is Dictionary or int(save.get("version", 0)) != SAVE_VERSION:
		_say_aside("Nothing saved yet.")
		return
	if not await _start_daemon():
		return
	var world: String = _tavern["world"]["world"]
	if not _ok(await Oamd.world_create(world, save["world"])):
		return
	for npc in _tavern["npcs"]:
		var params := {"state": save["npcs"][npc["create"]["npc"]]}
		if scripted_models:
			params["model"] = npc["restoreModel"]
		if not _ok(await Oamd.call_method("npc/restore", params)):
			return
	_copper = int(save["game"]["copper"])
	_bounty = int(save["world"]["player"]["bounty"])
	_regard = int(save["npcs"]["marta"]["memory"]["relationship"])
	var facts := PackedStringArray(save["npcs"]["marta"]["memory"]["facts"])
	_say_aside("Loaded. Marta remembers: %s" % "; ".join(facts))
	_update_status()


# The game's side of Marta's `place_order` tool: the price from the menu, paid from the purse.
# A String is the tool's output; `isError` tells the model the order did not happen.
func _place_order(arguments: Dictionary, _call: Dictionary) -> Variant:
	var game: Dictionary = _tavern["game"]
	var item := str(arguments.get("item", ""))
	var quantity := int(arguments.get("quantity", 1))
	var facts := {"item": item, "quantity": quantity, "copper": _copper}
	if not game["menu"].has(item):
		return {"output": game["say"]["notOnMenu"].format(facts), "isError": true}
	var total := int(game["menu"][item]) * quantity
	facts["total"] = total
	if total > _copper:
		return {"output": game["say"]["tooPoor"].format(facts), "isError": true}
	_copper -= total
	facts["copper"] = _copper
	_update_status()
	return game["say"]["orderServed"].format(facts)


func _on_npc_line_changed(npc: String, _request_id: int, line: String) -> void:
	if npc == _speaker:
		_subtitle.text = line  # the whole line so far: a lineReset has already replaced it


func _on_npc_event(npc: String, _request_id: Variant, event: Dictionary) -> void:
	if npc == _speaker and event.get("type") == "emotion":
		_emotion.text = event["emotion"]


func _on_model_progress(availability: Dictionary) -> void:
	_progress.max_value = maxf(float(availability.get("totalBytes", 0)), 1.0)
	_progress.value = float(availability.get("bytesDownloaded", 0))
	_status.text = str(availability.get("detail", availability.get("status", "")))


func _on_error(error: Dictionary) -> void:
	_say_aside("oamd: %s" % error.get("message", error))


# False (and the error shown) when `reply` is an error.
func _ok(reply: Dictionary) -> bool:
	if reply.has("error"):
		_on_error(reply["error"])
		return false
	return true


func _show_line(npc: String, line: String) -> void:
	_speaker = npc
	_speaker_label.text = _persona_name(npc)
	_subtitle.text = line
	_emotion.text = ""


func _say_aside(text: String) -> void:
	_speaker = ""
	_speaker_label.text = ""
	_subtitle.text = text
	_emotion.text = ""


func _persona_name(npc: String) -> String:
	for each in _tavern.get("npcs", []):
		if each["create"]["npc"] == npc:
			return each["create"]["persona"]["name"]
	return npc


func _update_status() -> void:
	_status.text = (
		"Purse: %d copper   Bounty: %d copper   Marta's regard: %d" % [_copper, _bounty, _regard]
	)


func _busy(busy: bool) -> void:
	for button in _actions.get_children():
		button.disabled = busy
