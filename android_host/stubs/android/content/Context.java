package android.content;
/** Stub: only the type, so backends can take the service's Context. */
public abstract class Context {}
