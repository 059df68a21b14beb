## Editor plugin: registers `oamd.gd` as the `Oamd` autoload while the plugin is enabled.
##
## The autoload is added in `_enable_plugin` and removed in `_disable_plugin`, Godot 4's hooks for
## the user switching the plugin on and off in Project Settings, not in `_enter_tree` and
## `_exit_tree`: those run every time the editor opens and closes the project, so removing it
## there would save project.godot without the autoload (a game started outside the editor, from
## the CLI, CI or a scripted export, would have no `Oamd`), and adding it there would put back an
## autoload the user removed by hand.
@tool
extends EditorPlugin

const AUTOLOAD_NAME := "Oamd"


func _enable_plugin() -> void:
	add_autoload_singleton(AUTOLOAD_NAME, _autoload_path())


func _disable_plugin() -> void:
	remove_autoload_singleton(AUTOLOAD_NAME)


func _autoload_path() -> String:
	return get_script().resource_path.get_base_dir().path_join("oamd.gd")
