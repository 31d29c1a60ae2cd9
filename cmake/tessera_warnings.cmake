# Warnings and sanitizer flags shared by every Tessera target.
function(tessera_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wno-sign-conversion -Wnon-virtual-dtor)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

macro(tessera_sanitizer_flags)
  if(TESSERA_SANITIZER)
    string(REPLACE ";" "," _tessera_san "${TESSERA_SANITIZER}")
    add_compile_options(-fsanitize=${_tessera_san} -fno-omit-frame-pointer)
    add_link_options(-fsanitize=${_tessera_san})
    if(_tessera_san MATCHES "undefined")
      add_compile_options(-fno-sanitize-recover=undefined)
    endif()
  endif()
endmacro()
