## Editor plugin: registers `oamd.gd` as the `Oamd` autoload while the plugin is enabled.
##
## The autoload is added in `_enter_tree` (when missing) and removed in `_disable_plugin`, not in
## `_exit_tree`: that also runs whenever the editor closes, and would save project.godot without
## the autoload, so a game started outside the editor (CLI, CI, an export made by a script) would
## have no `Oamd`.
@tool
extends EditorPlugin

const AUTOLOAD_NAME := "Oamd"


func _enter_tree() -> void:
	if not ProjectSettings.has_setting("autoload/" + AUTOLOAD_NAME):
		add_autoload_singleton(AUTOLOAD_NAME, _autoload_path())


func _disable_plugin() -> void:
	remove_autoload_singleton(AUTOLOAD_NAME)


func _autoload_path() -> String:
	return get_script().resource_path.get_base_dir().path_join("oamd.gd")
